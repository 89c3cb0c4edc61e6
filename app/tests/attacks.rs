//! The red-team suite: one test per known attack on work integrity, each running the attack
//! and asserting that it fails: the attacker gains nothing, the honest side loses nothing,
//! and the chain names the refusal with its code. Each test names the hole it closes.
//!
//! The attacks on what a settled record claims (tokens or price above what the requester
//! signed, a record signed for another transfer agent, a replayed record, a forged
//! signature or receipt, a record off the chain's price) run against committed batches in
//! `settlement.rs`, where each voids its batch through a challenge.

mod common;
mod support;

use std::collections::BTreeMap;

use common::{key, min_gas_price};
use gonka_client::disputes::{
    msg_open_dispute, msg_report_payload_unavailable, msg_submit_validation, msg_vote_dispute,
    msg_vote_payload_unavailable,
};
use gonka_client::settlement::{msg_open_escrow, msg_settle_batch};
use gonka_client::tx::{msg_register_node, msg_update_node, node_key_proof};
use gonka_client::{msg_send, sign, GasFee, SignerData};
use gonka_inference::InferenceWrite;
use gonka_proto::disputes as dpb;
use gonka_proto::inference::{
    self as pb, QueryRecordsRequest, QueryRecordsResponse, StoredRecord, WorkRecord,
};
use gonka_proto::query::page::{PageRequest, MAX_BYTES, MAX_LIMIT};
use gonka_proto::query::{self as q, cosmos::Simulate, Query};
use gonka_sdk::{Any, BlockContext, Delta, MemoryState, Module};
use prost::Message;
use serde_json::json;
use support::*;
use tendermint_proto::v0_38::abci::{ExecTxResult, ResponseCheckTx};

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
        beacon_tx: None,
        ..BlockContext::default()
    };
    committed.reset_reads();
    let sampler = gonka_disputes::Disputes;
    sampler.end_block(&ctx, &mut block).unwrap();
    // x/bls records the seed the sampler draws with first, as in every block.
    gonka_bls::Bls.begin_block(&ctx, &mut block).unwrap();
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
// Attacks through signed txs on a running chain.

const MODEL: &str = "meta/llama-8b";
const PRICE: u128 = 10;
/// Bond of every participant p0..p6.
const BOND: u128 = 1_000_000;
/// The chain's `min_stake` (`Setup::new`).
const MIN_STAKE: u128 = 1_000;
/// The transfer agent the requesters sign for, and another registered transfer agent.
const TA: &str = "p3";
const OTHER_TA: &str = "p4";
/// n0 of host p0 (key seed 10) and n1 of host p1 (key seed 11).
const N0: Exec<'static> = exec("p0", "n0", 10);
const N1: Exec<'static> = exec("p1", "n1", 11);
/// Blocks a committed batch stays open to challenges.
const WINDOW: u64 = 30;
/// Alice's escrow for the transfer agent.
const ESCROW: u128 = 1_000_000;
/// Accounts whose balances the attacks watch.
const WATCHED: [&str; 7] = ["alice", "bob", "p0", "p1", "p2", TA, OTHER_TA];

/// Seven participants p0..p6 bonding `BOND` (so a dispute on a record keeps three
/// candidates for its committee besides the host, the TA and the accuser); one model at
/// `PRICE`; every record sampled for validation, committees of 3, 20% slashed; TAs p3 and p4
/// registered; n0 (host p0) and n1 (host p1) registered; the validation pool funded by bob.
fn world() -> World {
    world_with(|_| {})
}

/// [`world`] with its settlement parameters changed by `settlement`.
fn world_with(settlement_params: impl FnOnce(&mut serde_json::Value)) -> World {
    let mut setup = Setup::new(7, BOND);
    setup.epoch_length = 1_000;
    let disputes = dpb::Params {
        min_sample_ppm: 1_000_000,
        max_sample_ppm: 1_000_000,
        decay_validations: 20,
        validation_deadline_blocks: 4,
        dispute_deadline_blocks: 20,
        committee_size: 3,
        slash_fraction_ppm: 200_000,
        min_deposit: "10000".into(),
        validation_reward_ppm: 1_000_000,
        jail_after_misses: 100,
        miss_penalty_ppm: 100_000,
        dispute_window_blocks: 100,
        reveal_deadline_blocks: 3,
    };
    let mut w = World::with_genesis(setup, |state| {
        state["inference"] = json!({
            "params": {"max_tokens_per_record": 100000, "payload_retention_blocks": 1000},
            "models": [{"id": MODEL, "price_per_token": PRICE.to_string(), "min_vram_mib": 0}],
        });
        state["disputes"] = json!({ "params": disputes });
        let settlement = &mut state["settlement"]["params"];
        settlement["challenge_window_blocks"] = WINDOW.into();
        settlement["leaf_answer_blocks"] = 5.into();
        settlement["leaf_sample_ppm"] = 1_000_000.into();
        // The test requests are signed at a fixed time long before the harness's blocks.
        settlement["max_record_age_secs"] = 100_000_000.into();
        settlement["batch_keep_secs"] = 200_000_000.into();
        settlement_params(settlement);
    });
    let mut txs = vec![
        w.tx(TA, vec![register_ta(TA, "https://ta.example")]),
        w.tx(
            OTHER_TA,
            vec![register_ta(OTHER_TA, "https://other.example")],
        ),
        w.tx(
            "p0",
            vec![
                msg_register_node(&addr("p0"), &node_spec("p0", "n0", &[MODEL], 24_000, 10)),
                register_bls("p0"),
            ],
        ),
        w.tx(
            "p1",
            vec![
                msg_register_node(&addr("p1"), &node_spec("p1", "n1", &[MODEL], 24_000, 11)),
                register_bls("p1"),
            ],
        ),
        w.tx(
            "bob",
            vec![gonka_client::msg_send(
                &addr("bob"),
                &gonka_rewards::validation_pool_address(),
                1_000_000,
            )],
        ),
    ];
    txs.push(w.tx(
        "alice",
        vec![msg_open_escrow(
            &addr("alice"),
            &addr(TA),
            ESCROW,
            1_000_000,
        )],
    ));
    let block = w.block(txs);
    for i in 0..6 {
        assert_eq!(
            block.result(i).code,
            0,
            "setup tx {i}: {}",
            block.result(i).log
        );
    }
    w
}

fn balances(w: &World) -> BTreeMap<&'static str, u128> {
    WATCHED.into_iter().map(|l| (l, w.balance_of(l))).collect()
}

/// `expected` with the given changes applied (`(label, signed delta)`).
fn moved(
    before: &BTreeMap<&'static str, u128>,
    changes: &[(&'static str, i128)],
) -> BTreeMap<&'static str, u128> {
    let mut after = before.clone();
    for (label, delta) in changes {
        let balance = after.get_mut(label).unwrap();
        *balance = (*balance as i128 + delta) as u128;
    }
    after
}

fn fee() -> i128 {
    FEE as i128
}

/// A record by alice for `TA` on `on` with `(prompt, completion)` tokens and `commission`.
fn honest(nonce: &str, on: Exec<'_>, tokens: (u64, u64), commission: u128) -> WorkRecord {
    work_record("alice", TA, nonce, MODEL, on, tokens, commission)
}

/// What an honest record of `tokens` costs its requester (without commission).
fn cost(tokens: (u64, u64)) -> i128 {
    (u128::from(tokens.0 + tokens.1) * PRICE) as i128
}

fn stored(w: &World, id: &str) -> Option<pb::StoredRecord> {
    let response = w.chain.query(
        q::inference::Record::PATH,
        prost::Message::encode_to_vec(&pb::QueryRecordRequest {
            inference_id: id.into(),
        }),
    );
    if response.code != 0 {
        return None;
    }
    let decoded: pb::QueryRecordResponse = prost::Message::decode(response.value.as_ref()).unwrap();
    decoded.record
}

fn work_of(w: &World, label: &str) -> u64 {
    w.work(w.current_epoch())
        .into_iter()
        .find(|(operator, _)| *operator == addr(label))
        .map(|(_, units)| units)
        .unwrap_or(0)
}

fn assert_failed(result: &ExecTxResult, codespace: &str, code: u32, fragment: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        (codespace, code),
        "{}",
        result.log
    );
    assert!(
        result.log.contains(fragment),
        "{:?} lacks {fragment:?}",
        result.log
    );
}

/// Attack: register a node key one does not hold (another host's, to claim its receipts),
/// replay a proof made for another host, node or chain, or register one key for two nodes.
/// Refused with `InvalidKeyProof` or `DuplicateNodeKey`; nothing is registered and n0's
/// records still verify against its own key.
#[test]
fn a_node_key_cannot_be_registered_without_possession_or_twice() {
    let mut w = world();
    let p1 = addr("p1");
    let with_proof = |id: &str, seed: u8, proof: Vec<u8>| {
        let mut spec = node_spec("p1", id, &[MODEL], 24_000, seed);
        spec.key_proof = proof;
        spec
    };
    let cases: Vec<(&str, Any, u32, &str)> = vec![
        (
            "p1",
            msg_register_node(
                &p1,
                &with_proof("nx", 20, node_key_proof(&node_key(21), CHAIN_ID, &p1, "nx")),
            ),
            27,
            "key_proof",
        ),
        (
            "p1",
            msg_register_node(
                &p1,
                &with_proof(
                    "nx",
                    20,
                    node_key_proof(&node_key(20), CHAIN_ID, &addr("p0"), "nx"),
                ),
            ),
            27,
            "key_proof",
        ),
        (
            "p1",
            msg_register_node(
                &p1,
                &with_proof(
                    "nx",
                    20,
                    node_key_proof(&node_key(20), "other-chain", &p1, "nx"),
                ),
            ),
            27,
            "key_proof",
        ),
        (
            "p1",
            msg_register_node(
                &p1,
                &with_proof("nx", 20, node_key_proof(&node_key(20), CHAIN_ID, &p1, "ny")),
            ),
            27,
            "key_proof",
        ),
        (
            "p1",
            msg_register_node(&p1, &with_proof("nx", 20, Vec::new())),
            27,
            "key_proof (0 bytes)",
        ),
        // n0's key with n0's own (valid, public) proof: bound to host p0 and node n0.
        (
            "p1",
            msg_register_node(
                &p1,
                &with_proof(
                    "nx",
                    10,
                    node_spec("p0", "n0", &[MODEL], 24_000, 10).key_proof,
                ),
            ),
            27,
            "key_proof",
        ),
        // p0 holds n0's key and proves it, but one key serves one node only.
        (
            "p0",
            msg_register_node(&addr("p0"), &node_spec("p0", "n0b", &[MODEL], 24_000, 10)),
            28,
            "already registered for node n0",
        ),
        (
            "p1",
            msg_update_node(&p1, &node_spec("p1", "n1", &[MODEL], 24_000, 10)),
            28,
            "already registered for node n0",
        ),
    ];
    w.block(vec![]);
    let state_before = w.raw_prefix(b"inference/");
    let before = balances(&w);
    let txs: Vec<Vec<u8>> = cases
        .iter()
        .map(|(signer, msg, _, _)| w.tx(signer, vec![msg.clone()]))
        .collect();
    let block = w.block(txs);
    for (i, (_, _, code, fragment)) in cases.iter().enumerate() {
        assert_failed(block.result(i), "inference", *code, fragment);
    }
    assert_eq!(
        w.raw_prefix(b"inference/"),
        state_before,
        "a refused registration changed the registry"
    );
    let fees = |label| cases.iter().filter(|c| c.0 == label).count() as i128 * fee();
    assert_eq!(
        balances(&w),
        moved(&before, &[("p0", -fees("p0")), ("p1", -fees("p1"))])
    );
    // n0 still signs for p0: its records settle.
    let r = honest("still-n0", N0, (1, 1), 0);
    commit_batch(&mut w, TA, std::slice::from_ref(&r), host_of);
    assert_eq!(
        stored(&w, &r.inference_id).unwrap().executor_host,
        addr("p0")
    );
}

/// The validator assigned to `record` (sampled in the last block) re-executes it and reports
/// `truth_tokens` with the right answer; the transfer agent reveals the output: the mismatch
/// opens validation dispute 0, whose committee reports the same; returns its outcome.
fn caught_by_validation(w: &mut World, record: &WorkRecord, truth_tokens: (u64, u64)) -> String {
    let id = record.inference_id.clone();
    let validator = w
        .query::<q::disputes::Validation>(dpb::QueryValidationRequest {
            inference_id: id.clone(),
        })
        .validation
        .unwrap()
        .validator;
    let label = label_of(&validator);
    // The right answer with the true counts.
    let re_execution = found(truth(&record.nonce), truth_tokens);
    let tx = w.tx(
        label,
        vec![msg_submit_validation(&validator, &id, &re_execution)],
    );
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    // The TA reveals the output; the chain finds the validator's counts are not the record's.
    let tx = w.tx(TA, vec![reveal_msg(TA, record)]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "mismatch"
    );
    assert_eq!(
        tx_events(block.result(0), "dispute_opened")[0]["kind"],
        "validation"
    );
    let dispute = w
        .query::<q::disputes::Dispute>(dpb::QueryDisputeRequest { id: 0 })
        .dispute
        .unwrap();
    assert_eq!(dispute.inference_id, id);
    // The committee re-executes too and reports the same true counts.
    committee_decides(w, 0, |m| msg_vote_dispute(m, 0, &re_execution))
}

/// The same attack in a committed batch: the padded leaf is sampled, provided, validated
/// and disputed; the executor is slashed and refunds the requester, and the padded work —
/// credited only when the batch becomes final, after the dispute — is never counted: the
/// dispute leaves a work debt that the batch's credit pays.
#[test]
fn inflated_token_counts_in_a_committed_batch_lose_the_validation_and_earn_no_work() {
    let mut w = world();
    let truth_tokens = (100, 50);
    let mut input = request(TA, "padded", MODEL, N0, truth_tokens, 0);
    input.prompt_tokens = 120;
    let padded = signed_record("alice", 10, &input);
    let (alice, p0) = (w.balance_of("alice"), w.balance_of("p0"));
    commit_batch(&mut w, TA, std::slice::from_ref(&padded), host_of);
    let charged = cost((120, 50)) as u128;
    let escrow = || {
        w.query::<q::settlement::Escrow>(gonka_proto::settlement::QueryEscrowRequest {
            requester: addr("alice"),
            transfer_agent: addr(TA),
        })
        .escrow
        .unwrap()
        .balance
    };
    assert_eq!(escrow(), (ESCROW - charged).to_string());
    let sampling = w.block(vec![]);
    assert_eq!(
        sampling.events("validation_sampled")[0]["inference_id"],
        padded.inference_id
    );
    let outcome = caught_by_validation(&mut w, &padded, truth_tokens);
    assert_eq!(outcome, "executor_faulted");
    assert_eq!(
        w.balance_of("alice"),
        alice + charged,
        "the requester is refunded"
    );
    assert_eq!(
        w.bonded("p0"),
        BOND - BOND / 5,
        "the executor is slashed 20%"
    );
    until_batches_final(&mut w, TA);
    assert_eq!(
        w.balance_of("p0"),
        p0,
        "the batch's payout only makes up the refund: the executor keeps nothing"
    );
    assert_eq!(work_of(&w, "p0"), 0, "the padded work is never counted");
    assert_eq!(w.participant("p0").work_debt, 0, "the debt is paid off");
}

/// Attack: act as host or transfer agent without stake at risk: a host that unbonds below
/// `min_stake` after registering its node keeps serving, and a TA below `min_stake` keeps
/// settling. A committed batch paying the host is refused whole with `NotStaked`, and so is
/// the TA's batch; nothing is debited, and at the end of the block both are deregistered.
#[test]
fn an_unstaked_host_or_ta_earns_nothing() {
    let mut w = world();
    let keep = MIN_STAKE - 1;
    let on_n1 = honest("unstaked-host", N1, (10, 10), 1);
    let good = honest("staked-host", N0, (10, 10), 1);
    let for_other = work_record("alice", OTHER_TA, "unstaked-ta", MODEL, N0, (10, 10), 1);
    let before = balances(&w);
    let escrow = w.escrow("alice", TA);
    // The host of n1 and the other TA unbond below min_stake, then work of theirs arrives in
    // the same block: it is refused at that moment.
    let txs = vec![
        w.tx("p1", vec![unstake_msg("p1", BOND - keep)]),
        w.tx(OTHER_TA, vec![unstake_msg(OTHER_TA, BOND - keep)]),
        settle_tx(&mut w, TA, &[on_n1, good], host_of).1,
        settle_tx(&mut w, OTHER_TA, &[for_other], host_of).1,
    ];
    let block = w.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(block.result(1).code, 0, "{}", block.result(1).log);
    assert_eq!((w.bonded("p1"), w.bonded(OTHER_TA)), (keep, keep));
    assert_failed(block.result(2), "inference", 4, "host paid by a batch");
    assert_failed(
        block.result(3),
        "inference",
        4,
        "transfer agent settling a batch",
    );
    assert_eq!(w.escrow("alice", TA), escrow, "nothing is debited");
    assert_eq!(
        balances(&w),
        moved(
            &before,
            &[(TA, -fee()), ("p1", -fee()), (OTHER_TA, -2 * fee())]
        ),
        "nobody earns"
    );

    // At the end of that block both lost their registrations: nobody routes to them any more.
    let deregistered = block.events("host_deregistered");
    let operators: Vec<&str> = deregistered
        .iter()
        .map(|e| e["operator"].as_str())
        .collect();
    let mut expected = [addr("p1"), addr(OTHER_TA)];
    expected.sort();
    assert_eq!(operators, expected, "{deregistered:?}");
    let nodes = w.query::<q::inference::Nodes>(pb::QueryNodesRequest::default());
    let ids: Vec<&str> = nodes.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["n0"], "n1 is deregistered, n0's host is still staked");
    let tas = w.query::<q::inference::TransferAgents>(pb::QueryTransferAgentsRequest::default());
    let tas: Vec<&str> = tas
        .transfer_agents
        .iter()
        .map(|t| t.address.as_str())
        .collect();
    assert_eq!(tas, [addr(TA)]);
}

/// The label (p0..p6) of participant `address`.
fn label_of(address: &str) -> &'static str {
    ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]
        .into_iter()
        .find(|l| addr(l) == address)
        .unwrap()
}

/// The deadlines `address` missed, as its reputation counts them.
fn missed(w: &World, address: &str) -> u64 {
    w.query::<q::disputes::Stats>(dpb::QueryStatsRequest {
        address: address.into(),
    })
    .reputation
    .unwrap()
    .missed
}

/// The host label of a record executed on n0 or n1.
fn host_of(record: &WorkRecord) -> &'static str {
    if record.executor_node == "n0" {
        "p0"
    } else {
        "p1"
    }
}

/// Commits `record` in a batch of `TA`, provides its sampled leaf and lets the next block
/// sample the stored record for validation; returns its id and its assigned validator.
fn settle_and_sample(w: &mut World, record: &WorkRecord) -> (String, String) {
    let id = record.inference_id.clone();
    commit_batch(w, TA, std::slice::from_ref(record), host_of);
    w.block(vec![]);
    let validator = w
        .query::<q::disputes::Validation>(dpb::QueryValidationRequest {
            inference_id: id.clone(),
        })
        .validation
        .unwrap()
        .validator;
    (id, validator)
}

/// Attack (hole 5): a TA that stops serving a record's request body used to make the assigned
/// validators miss their deadlines (three misses jail). Now the validator reports the body
/// unavailable, a committee tries the TA too, and when it cannot get the body either the TA is
/// slashed (refunding the requester), the unverifiable work earns no credit, and no validator
/// is penalized.
#[test]
fn a_withholding_transfer_agent_is_penalized_and_no_validator_is() {
    let mut w = world();
    let (id, validator) = settle_and_sample(&mut w, &honest("withheld", N0, (100, 50), 0));
    let alice = w.balance_of("alice");
    let reporter = label_of(&validator);
    let tx = w.tx(
        reporter,
        vec![msg_report_payload_unavailable(&validator, &id)],
    );
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "payload_unavailable"
    );
    let opened = &tx_events(block.result(0), "dispute_opened")[0];
    assert_eq!(opened["kind"], "payload");
    let dispute = w
        .query::<q::disputes::Dispute>(dpb::QueryDisputeRequest { id: 0 })
        .dispute
        .unwrap();
    assert!(!dispute.committee.contains(&validator));
    assert!(
        !dispute.committee.contains(&addr(TA)),
        "the accused TA does not judge itself"
    );
    let outcome = committee_decides(&mut w, 0, |m| msg_vote_payload_unavailable(m, 0));
    assert_eq!(outcome, "payload_withheld");
    let cost = cost((100, 50)) as u128;
    assert_eq!(
        w.balance_of("alice"),
        alice + cost,
        "the requester is refunded"
    );
    assert_eq!(
        w.bonded(TA),
        BOND - BOND / 5,
        "the withholding TA is slashed 20%"
    );
    assert_eq!(w.bonded("p0"), BOND, "the executor is not slashed");
    assert_eq!(work_of(&w, "p0"), 0, "unverifiable work earns no credit");
    for member in std::iter::once(&validator).chain(&dispute.committee) {
        assert_eq!(
            missed(&w, member),
            0,
            "{member} is not blamed for the missing body"
        );
        assert_eq!(w.bonded(label_of(member)), BOND, "{member} keeps its stake");
    }
}

/// The other side of hole 5: a validator that falsely reports a body unavailable gains
/// nothing. The committee fetches it, re-executes, upholds the executor, and the reporter gets
/// a missed deadline on its record; the TA is not slashed.
#[test]
fn a_false_unavailability_report_only_costs_the_reporter() {
    let mut w = world();
    let record = honest("served", N0, (100, 50), 0);
    let (id, validator) = settle_and_sample(&mut w, &record);
    let reporter = label_of(&validator);
    let tx = w.tx(
        reporter,
        vec![msg_report_payload_unavailable(&validator, &id)],
    );
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    assert_eq!(dispute_of(&w, 0).kind, "payload");
    let truth_found = found(truth("served"), (100, 50));
    // The TA reveals the output the dispute asked for, then the committee votes.
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    let outcome = committee_decides(&mut w, 0, |m| msg_vote_dispute(m, 0, &truth_found));
    assert_eq!(outcome, "executor_upheld");
    assert_eq!(w.bonded(TA), BOND, "the TA that served is not slashed");
    assert_eq!(w.bonded("p0"), BOND);
    until_batches_final(&mut w, TA);
    assert_eq!(work_of(&w, "p0"), 150, "the verified work keeps its credit");
    assert_eq!(
        missed(&w, &validator),
        1,
        "the false report counts as a miss"
    );
}

/// Hole 5: disputes have an age limit, so nobody can accuse a record whose body the TA was
/// allowed to drop.
#[test]
fn a_record_cannot_be_disputed_after_its_window() {
    let mut w = world();
    let (id, _) = settle_and_sample(&mut w, &honest("old", N0, (100, 50), 0));
    let settled_at = stored(&w, &id).unwrap().height;
    while w.chain.height() < settled_at + 100 {
        w.block(vec![]);
    }
    let tx = w.tx("alice", vec![msg_open_dispute(&addr("alice"), &id, 10_000)]);
    let alice = w.balance_of("alice");
    let block = w.block(vec![tx]);
    assert_failed(block.result(0), "disputes", 16, "dispute_window_blocks");
    assert_eq!(w.balance_of("alice"), alice - FEE, "only the fee is paid");
}

/// Hole 5: a user dispute that ends undecided is not free for the accuser: half the deposit
/// goes to the executor's host.
#[test]
fn an_undecided_user_dispute_costs_half_the_deposit() {
    let mut w = world();
    let record = honest("doubted", N0, (100, 50), 0);
    let (id, _) = settle_and_sample(&mut w, &record);
    let deposit = 10_000u128;
    let (alice, p0) = (w.balance_of("alice"), w.balance_of("p0"));
    let tx = w.tx(
        "alice",
        vec![msg_open_dispute(&addr("alice"), &id, deposit)],
    );
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    let dispute = w
        .query::<q::disputes::Dispute>(dpb::QueryDisputeRequest { id: 0 })
        .dispute
        .unwrap();
    // The record's validator never answers; once it has missed, the dispute asks for the
    // output and the TA reveals it, but nobody votes: at the deadline it is undecided.
    while validation_of(&w, &id).status != "missed" {
        w.block(vec![]);
    }
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    while w.chain.height() <= dispute.deadline_height {
        w.block(vec![]);
    }
    let resolved = w
        .query::<q::disputes::Dispute>(dpb::QueryDisputeRequest { id: 0 })
        .dispute
        .unwrap();
    assert_eq!(resolved.status, "undecided");
    assert_eq!(w.balance_of("alice"), alice - FEE - deposit / 2);
    assert_eq!(w.balance_of("p0"), p0 + deposit / 2);
}

// ---------------------------------------------------------------------------------------
// Lazy validation (hole 3): the record carries only the executor's salted commitment; a
// validator (or committee member) commits its own result, bound to its address, before the
// transfer agent reveals the salt and answer; then the chain compares.

/// Every member of dispute `id` sends `vote(member)`, all in one block; returns the outcome
/// the majority-making vote settled.
fn committee_decides(w: &mut World, id: u64, vote: impl Fn(&str) -> Any) -> String {
    let committee = drawn_dispute(w, id).committee;
    let votes: Vec<Vec<u8>> = committee
        .iter()
        .map(|m| w.tx(label_of(m), vec![vote(m)]))
        .collect();
    let block = w.block(votes);
    let deciding = block.result(committee.len() / 2);
    assert_eq!(deciding.code, 0, "{}", deciding.log);
    tx_events(deciding, "dispute_resolved")[0]["outcome"].clone()
}

/// The validation of record `id`.
fn validation_of(w: &World, id: &str) -> dpb::Validation {
    w.query::<q::disputes::Validation>(dpb::QueryValidationRequest {
        inference_id: id.into(),
    })
    .validation
    .unwrap()
}

fn dispute_of(w: &World, id: u64) -> dpb::Dispute {
    w.query::<q::disputes::Dispute>(dpb::QueryDisputeRequest { id })
        .dispute
        .unwrap()
}

/// Dispute `id` with its committee: a dispute's committee is drawn in the block after the
/// one that opened it, so this commits an empty block first if it has none yet.
fn drawn_dispute(w: &mut World, id: u64) -> dpb::Dispute {
    if dispute_of(w, id).committee.is_empty() {
        w.block(Vec::new());
    }
    let dispute = dispute_of(w, id);
    assert!(
        !dispute.committee.is_empty(),
        "dispute {id} has no committee"
    );
    dispute
}

/// `MsgSubmitValidation` of `validator` carrying `commitment` as it is (what a lazy validator
/// builds from public bytes instead of its own re-execution).
fn raw_validation(validator: &str, id: &str, commitment: Vec<u8>) -> Any {
    Any {
        type_url: "/gonka.disputes.v1.MsgSubmitValidation".into(),
        value: dpb::MsgSubmitValidation {
            validator: validator.into(),
            inference_id: id.into(),
            result_commitment: commitment,
            payload_unavailable: false,
            ..Default::default()
        }
        .encode_to_vec(),
    }
}

/// Attack: a validator that does not re-execute tries to pass the validation with what is
/// public. Nothing on chain opens the record's commitment before the validator commits (the
/// TA cannot reveal early: disputes 18), so the lazy validator can only commit something it
/// did not compute — here the record's own output commitment. The reveal shows the mismatch,
/// the committee upholds the executor, and the lazy validator is slashed 20%.
#[test]
fn a_lazy_validator_cannot_match_without_re_executing() {
    let mut w = world();
    let record = honest("lazy", N0, (100, 50), 0);
    let (id, validator) = settle_and_sample(&mut w, &record);
    let lazy = label_of(&validator);
    // Too early: no result is committed, so nothing may open the commitment yet.
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    let block = w.block(vec![tx]);
    assert_failed(
        block.result(0),
        "disputes",
        18,
        "only after the assigned validator",
    );
    let public = stored(&w, &id).unwrap().record.unwrap().output_commitment;
    let tx = w.tx(lazy, vec![raw_validation(&validator, &id, public)]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(validation_of(&w, &id).status, "committed");
    let lazy_before = w.balance_of(lazy);
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "mismatch"
    );
    assert_eq!(dispute_of(&w, 0).accuser, validator);
    let truth_found = found(truth("lazy"), (100, 50));
    let outcome = committee_decides(&mut w, 0, |m| msg_vote_dispute(m, 0, &truth_found));
    assert_eq!(outcome, "executor_upheld");
    assert_eq!(
        w.bonded(lazy),
        BOND - BOND / 5,
        "the lazy validator is slashed 20%"
    );
    assert_eq!(
        w.balance_of(lazy),
        lazy_before,
        "and earns no validation reward"
    );
    assert_eq!(w.bonded("p0"), BOND, "the honest executor keeps its stake");
    until_batches_final(&mut w, TA);
    assert_eq!(work_of(&w, "p0"), 150, "and its work credit");
}

/// Attack: a committee member copies another member's committed vote instead of
/// re-executing. A commitment names its author, so the copy is not the revealed answer under
/// the copier's address: it counts against the executor, the decided dispute finds it on the
/// losing side, and the copier earns nothing and loses reputation as for a missed deadline.
#[test]
fn a_copied_vote_supports_nobody_and_costs_the_copier() {
    let mut w = world();
    let record = honest("copied", N0, (100, 50), 0);
    let (id, validator) = settle_and_sample(&mut w, &record);
    // A validator that frames the honest executor opens the dispute.
    let framed = found(lie("copied"), (100, 50));
    let tx = w.tx(
        label_of(&validator),
        vec![msg_submit_validation(&validator, &id, &framed)],
    );
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    let dispute = drawn_dispute(&mut w, 0);
    let (honest_member, copier, last) = (
        &dispute.committee[0],
        &dispute.committee[1],
        &dispute.committee[2],
    );
    let truth_found = found(truth("copied"), (100, 50));
    let tx = w.tx(
        label_of(honest_member),
        vec![msg_vote_dispute(honest_member, 0, &truth_found)],
    );
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    // The copier reads the honest member's commitment from the chain and votes it as its own.
    let seen = dispute_of(&w, 0).votes[0].result_commitment.clone();
    let copy = Any {
        type_url: "/gonka.disputes.v1.MsgVoteDispute".into(),
        value: dpb::MsgVoteDispute {
            voter: copier.clone(),
            dispute_id: 0,
            result_commitment: seen,
            payload_unavailable: false,
            ..Default::default()
        }
        .encode_to_vec(),
    };
    let copier_before = w.balance_of(label_of(copier));
    let tx = w.tx(label_of(copier), vec![copy]);
    let block = w.block(vec![tx]);
    assert_eq!(
        tx_events(block.result(0), "dispute_vote")[0]["supports"],
        "accuser",
        "the copy is not the answer under the copier's address"
    );
    let tx = w.tx(
        label_of(last),
        vec![msg_vote_dispute(last, 0, &truth_found)],
    );
    let block = w.block(vec![tx]);
    assert_eq!(
        tx_events(block.result(0), "dispute_resolved")[0]["outcome"],
        "executor_upheld"
    );
    assert_eq!(
        w.balance_of(label_of(copier)),
        copier_before - FEE,
        "the copier earns no validation reward"
    );
    assert_eq!(
        missed(&w, copier),
        1,
        "a vote against the decision counts as a miss"
    );
    assert_eq!(missed(&w, honest_member), 0);
    assert_eq!(w.bonded("p0"), BOND, "the framed executor keeps its stake");
}

/// Attack: a transfer agent (or a host colluding with it) keeps the salt to itself, so a
/// committed validation can never be compared. At the reveal deadline the record is
/// unverifiable: the validation is `output_withheld`, a `reveal` dispute is settled at once
/// as `payload_withheld` — the TA slashed 20% refunding the requester, the work voided — and
/// the validator that did its part is not penalized but shares the slash.
#[test]
fn an_output_the_ta_never_reveals_is_settled_against_the_ta() {
    let mut w = world();
    let record = honest("unrevealed", N0, (100, 50), 0);
    let (id, validator) = settle_and_sample(&mut w, &record);
    let tx = w.tx(
        label_of(&validator),
        vec![msg_submit_validation(
            &validator,
            &id,
            &found(truth("unrevealed"), (100, 50)),
        )],
    );
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    let (alice, validator_before) = (w.balance_of("alice"), w.balance_of(label_of(&validator)));
    while validation_of(&w, &id).status == "committed" {
        w.block(vec![]);
    }
    assert_eq!(validation_of(&w, &id).status, "output_withheld");
    let dispute = dispute_of(&w, 0);
    assert_eq!(
        (dispute.kind.as_str(), dispute.status.as_str()),
        ("reveal", "payload_withheld")
    );
    assert!(
        dispute.committee.is_empty(),
        "nothing to judge: the chain saw it"
    );
    let cost = cost((100, 50)) as u128;
    assert_eq!(w.bonded(TA), BOND - BOND / 5, "the TA is slashed 20%");
    assert_eq!(
        w.balance_of("alice"),
        alice + cost,
        "the requester is refunded"
    );
    assert_eq!(work_of(&w, "p0"), 0, "unverifiable work earns no credit");
    assert_eq!(
        w.balance_of(label_of(&validator)),
        validator_before + (BOND / 5 - cost),
        "the validator shares the slash"
    );
    assert_eq!(w.bonded(label_of(&validator)), BOND);
    // Too late now: nothing waits for the reveal any more.
    let tx = w.tx(TA, vec![reveal_msg(TA, &record)]);
    assert_failed(w.block(vec![tx]).result(0), "disputes", 18, "nothing waits");
}

/// Hole 4: a host that unbonds right after faking work must still have that stake when the
/// dispute of the work settles. Genesis refuses an unbonding (`unbonding_epochs ×
/// epoch_length` blocks) shorter than the disputes' challenge window.
#[test]
fn genesis_refuses_an_unbonding_shorter_than_the_challenge_window() {
    use gonka_sdk::GenesisJson;
    let dir = state_dir();
    let store = gonka_store::Store::open(&dir.path().join("state.redb")).unwrap();
    // The default disputes windows: a 631-block challenge window.
    let window = gonka_disputes::challenge_window_blocks(&gonka_disputes::default_params());
    assert_eq!(window, 631);
    for (unbonding_epochs, accepted) in [(6, false), (7, true)] {
        let mut state = gonka_sdk::Delta::new(&store);
        gonka_epochs::Epochs
            .init_genesis_json(&mut state, Some(&json!({"params": {"epoch_length": 100}})))
            .unwrap();
        let stake = json!({"params": {"min_stake": "1", "unbonding_epochs": unbonding_epochs,
            "stake_weight_ppm": 100000, "max_power_share_ppm": 300000, "jail_epochs": 2,
            "min_unstake": "1", "max_unbonding_entries": 7}});
        gonka_stake::Stake
            .init_genesis_json(&mut state, Some(&stake))
            .unwrap();
        gonka_inference::Inference
            .init_genesis_json(&mut state, None)
            .unwrap();
        let result = gonka_disputes::Disputes.init_genesis_json(&mut state, None);
        match (result, accepted) {
            (Ok(_), true) => {}
            (Err(e), false) => {
                assert_eq!((e.codespace, e.code), ("disputes", 2), "{}", e.log);
                assert!(
                    e.log.contains(
                        "is 600 blocks but must be at least the 631-block challenge window"
                    ),
                    "{}",
                    e.log
                );
            }
            (other, _) => panic!("unbonding_epochs {unbonding_epochs}: {other:?}"),
        }
    }
}

/// Hole 5: genesis refuses time windows under which a payload may be pruned while someone can
/// still be asked to re-execute it.
#[test]
fn genesis_refuses_payload_retention_shorter_than_the_challenge_window() {
    use gonka_sdk::GenesisJson;
    let dir = state_dir();
    let store = gonka_store::Store::open(&dir.path().join("state.redb")).unwrap();
    let disputes = json!({ "params": {
        "min_sample_ppm": 10000, "max_sample_ppm": 100000, "decay_validations": 20,
        "validation_deadline_blocks": 20, "dispute_deadline_blocks": 30, "committee_size": 3,
        "slash_fraction_ppm": 200000, "min_deposit": "1", "validation_reward_ppm": 1000000,
        "jail_after_misses": 3, "miss_penalty_ppm": 100000, "dispute_window_blocks": 600,
        "reveal_deadline_blocks": 10,
    }});
    for (retention, accepted) in [(630, false), (631, true)] {
        let mut state = gonka_sdk::Delta::new(&store);
        let inference = json!({"params": {
            "max_tokens_per_record": 100, "payload_retention_blocks": retention}});
        gonka_inference::Inference
            .init_genesis_json(&mut state, Some(&inference))
            .unwrap();
        let result = gonka_disputes::Disputes.init_genesis_json(&mut state, Some(&disputes));
        match (result, accepted) {
            (Ok(_), true) => {}
            (Err(e), false) => {
                assert_eq!((e.codespace, e.code), ("disputes", 2), "{}", e.log);
                assert!(
                    e.log
                        .contains("payload_retention_blocks is 630 but must be at least 631"),
                    "{}",
                    e.log
                );
            }
            (other, _) => panic!("retention {retention}: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Unpriced CheckTx work (issue 10, hole 9): every tx pays gas for its bytes, signature
// checks and state access, and cheap checks run before expensive ones.

/// The transfer agent of the gas tests ([`batch_world`]); p0 hosts node n0.
const GAS_TA: &str = BATCH_TA;

/// [`batch_world`] with carol holding less than one fee.
fn gas_world() -> World {
    batch_world(("carol", common::MIN_FEE / 2))
}

/// Gas a CheckTx charged beyond the bytes of `tx`.
fn gas_beyond_bytes(check: &ResponseCheckTx, tx: &[u8]) -> u64 {
    let per_byte = gonka_auth::default_params().tx_size_cost_per_byte;
    u64::try_from(check.gas_used).unwrap() - tx.len() as u64 * per_byte
}

/// Attack: flood the mempool with full batches from accounts that cannot pay, so every node
/// decodes and checks the batch's thousand lines, decompresses its signature, runs its BLS
/// pairing check (and reads its thousand escrows) for nothing. The ante
/// finds the account, sequence and fee first, and the batch is checked only after it, its
/// signature check charged as gas: a batch from a nonexistent account, or from one that
/// cannot pay its fee, is refused with the account's error, and what it cost beyond its
/// bytes is the same one or two state reads whether it has 1 requester line or the most
/// (`max_batch_lines`) — no signature of it was verified. The same garbage batch from the
/// real transfer agent pays for its BLS check and is refused for its signature, so it would
/// have failed had anyone checked it.
#[test]
fn a_batch_from_an_account_that_cannot_pay_is_refused_before_its_signature_check() {
    let mut world = gas_world();
    let tx = world.tx("p0", vec![register_bls("p0")]);
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    let max = gonka_settlement::default_params().max_batch_lines as usize;
    let carol_number = world.account(&addr("carol")).account_number;
    let bls_cost = gonka_auth::default_params().sig_verify_cost_bls12_381;
    let read_cost = gonka_auth::default_params().read_cost_flat;
    let state_before = world.raw_prefix(b"settlement/");
    let carol_before = world.balance_of("carol");

    let mut refused = Vec::new();
    for (label, number, codespace, code) in [
        ("mallory", 0, "auth", 11),         // never funded: no account
        ("carol", carol_number, "bank", 4), // holds half a fee
    ] {
        let small = settle_tx_by(label, number, &unverifiable_batch(label, 1, 1));
        let full = settle_tx_by(label, number, &unverifiable_batch(label, 1, max));
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
            "{label}: a batch of {max} lines cost more than its bytes over a batch of 1"
        );
        assert!(
            gas_beyond_bytes(&full_check, &full) < 3 * read_cost,
            "{label}: {} gas beyond the bytes is more than two state reads",
            gas_beyond_bytes(&full_check, &full),
        );
        refused.push((full, codespace, code));
    }
    assert!(refused[0].0.len() > 30_000, "the batch is full-sized");
    // Its lines are not even looked at before the ante: a malformed one from the account
    // that does not exist is refused for the account, not for the line.
    let mut malformed = unverifiable_batch("mallory", 1, 2);
    malformed.requesters[1].requester = "not an address".into();
    malformed.host_signature.truncate(3);
    let check = world.chain.check_tx(settle_tx_by("mallory", 0, &malformed));
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("auth", 11),
        "{}",
        check.log
    );

    // The same batch from the registered transfer agent pays its BLS check and is refused
    // for its signature (settlement 9), in CheckTx and in a block.
    let from_ta = world.tx(
        GAS_TA,
        vec![msg_settle_batch(&unverifiable_batch(GAS_TA, 1, max))],
    );
    let check = world.chain.check_tx(from_ta.clone());
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("settlement", 9),
        "{}",
        check.log
    );
    assert!(gas_beyond_bytes(&check, &from_ta) > bls_cost);

    // In a block they change nothing either (the GAS_TA's refused batch pays its fee).
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
    let result = block.result(2);
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("settlement", 9),
        "{}",
        result.log
    );
    assert_eq!(world.raw_prefix(b"settlement/"), state_before);
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

// ---------------------------------------------------------------------------------------
// Unbounded list queries (issue 10, hole 13).

/// Committed state holding `count` work records of epoch 0, each with a model name of
/// `padding` bytes (so records can be made large).
fn epoch_of_records(count: usize, padding: usize) -> MemoryState {
    let empty = MemoryState::default();
    let mut state = Delta::new(&empty);
    for n in 0..count {
        let mut stored = record(n);
        stored.record.as_mut().unwrap().model = "m".repeat(padding);
        state.put_record(&stored);
    }
    MemoryState::from_changes(state.into_parts().0)
}

/// Asks `/inference/records` of epoch 0 for "everything" (the largest limit a request can
/// carry) and returns the answer's encoded size and the response.
fn ask_for_every_record(state: &MemoryState) -> (usize, QueryRecordsResponse) {
    let request = QueryRecordsRequest {
        epoch: 0,
        executor: String::new(),
        pagination: Some(PageRequest {
            key: Vec::new(),
            limit: u64::MAX,
        }),
    };
    let answer = gonka_inference::Inference
        .query(q::inference::Records::PATH, &request.encode_to_vec(), state)
        .unwrap()
        .unwrap();
    (
        answer.len(),
        QueryRecordsResponse::decode(answer.as_slice()).unwrap(),
    )
}

/// Attack (issue 10, hole 13): ask a list query (`/inference/records`, `/disputes/list`, ...)
/// for everything, so that one `abci_query` makes the node read the whole list into memory
/// and ship it in one answer; a spammer who grows the list grows every such answer. Every
/// list query now reads one page by a range scan: at most `MAX_LIMIT` items whatever limit
/// the request names, the rows after the page unread, and at most `MAX_BYTES` of items.
#[test]
fn an_unbounded_list_query_answers_one_bounded_page() {
    let max = MAX_LIMIT as usize;
    let state = epoch_of_records(3 * max, 0);
    state.reset_reads();
    let (bytes, page) = ask_for_every_record(&state);
    assert_eq!(
        page.records.len(),
        max,
        "a request for everything gets one full page"
    );
    // The page's index rows and records, and the one index row that says the list goes on:
    // nothing of the other 2,000 records.
    assert_eq!(state.rows_read(), 2 * max + 1);
    let next_key = page.pagination.unwrap().next_key;
    assert!(!next_key.is_empty(), "the page says where the list goes on");
    assert!(bytes <= MAX_BYTES + 64, "{bytes} bytes");

    // Large items: the page stops at the byte bound long before the row limit.
    let state = epoch_of_records(max, 16 * 1024);
    let (bytes, page) = ask_for_every_record(&state);
    assert!(bytes <= MAX_BYTES + 64, "{bytes} bytes");
    assert!(
        page.records.len() < max / 10,
        "{} records",
        page.records.len()
    );
    assert!(!page.pagination.unwrap().next_key.is_empty());
}

/// `TA`'s batch `number` of one honest record (`nonce`, on n0) whose hosts co-sign a claimed
/// `record_count` of `claimed`: the chain cannot see the tree, only the count, so it is what
/// the next block's sampler loops over.
fn claimed_batch(w: &mut World, number: u64, nonce: &str, claimed: u64) -> Vec<u8> {
    use gonka_client::settlement::{cosign, Batch, Served};
    let record = honest(nonce, N0, (10, 10), 0);
    let served = Served {
        cost: cost((10, 10)) as u128,
        work_per_token: 0,
        host: addr(N0.host),
        record,
    };
    let mut batch = Batch::build(&addr(TA), number, vec![served]).unwrap();
    batch.msg.record_count = claimed;
    let signature = cosign(&bls_key(N0.host), CHAIN_ID, &batch.msg);
    w.tx(TA, vec![msg_settle_batch(&batch.signed(&[signature]))])
}

/// Attack (issue 34, item 3): one `MsgSettleBatch` claiming 1,000,000 records made the next
/// block hash every index and write a demand per sampled one (at this world's 100% rate, a
/// million writes in one `begin_block`) for one ordinary fee. Now a batch commits at most
/// `max_batch_records` (100,000), and the claimed count pays the sampling's gas at settle
/// time: at the cap it is 100,000 demands' writes, far past an ordinary gas limit, so the
/// batch runs out of gas and the next block samples nothing.
#[test]
fn a_batch_claiming_a_huge_record_count_is_capped_and_pays_for_its_sampling() {
    let mut w = world();
    let params = gonka_settlement::default_params();
    let tx = claimed_batch(&mut w, 1, "million", 1_000_000);
    let block = w.block(vec![tx]);
    assert_failed(
        block.result(0),
        "settlement",
        6,
        &format!("and {} records", params.max_batch_records),
    );

    let at_cap = params.max_batch_records;
    let tx = claimed_batch(&mut w, 1, "at-cap", at_cap);
    let costs = gonka_auth::default_params();
    let per_demand = 6 * costs.write_cost_flat;
    let used = simulate(&w, tx.clone());
    assert!(
        used >= at_cap * per_demand,
        "a batch claiming {at_cap} records sampled at 100% used {used} gas, less than {at_cap} demands' writes"
    );
    let block = w.block(vec![tx]);
    assert_failed(block.result(0), "sdk", 11, "batch leaf sampling");
    w.block(vec![]);
    assert!(
        demanded_leaves(&w, TA).is_empty(),
        "a refused batch is never sampled"
    );

    // An honest batch of one record pays for one demand and is sampled as before.
    let tx = claimed_batch(&mut w, 1, "one", 1);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    w.block(vec![]);
    assert_eq!(demanded_leaves(&w, TA).len(), 1);
}

/// Attack (issue 34, item 3): many batches in one block, each under `max_batch_records`,
/// together still flood the next block's sampler. The records of one block's batches are
/// capped by `max_block_records`: the batch past it is refused with `settlement` 16 and
/// nothing else, the next block demands exactly the admitted batches' samples, and the
/// refused batch settles in a later block.
#[test]
fn the_records_one_block_settles_are_capped_so_its_sampling_is_bounded() {
    let mut w = world_with(|settlement| {
        settlement["max_batch_records"] = 300.into();
        settlement["max_block_records"] = 500.into();
    });
    let first = claimed_batch(&mut w, 1, "first", 300);
    let second = claimed_batch(&mut w, 2, "second", 300);
    let escrow = w.escrow("alice", TA);
    let block = w.block(vec![first, second]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_failed(
        block.result(1),
        "settlement",
        16,
        "already commit to 300 of the 500 records",
    );
    assert_eq!(
        w.escrow("alice", TA),
        escrow - cost((10, 10)) as u128,
        "only the admitted batch debits the escrow"
    );
    w.block(vec![]);
    let demanded = demanded_leaves(&w, TA);
    assert_eq!(
        demanded.len(),
        300,
        "the block after samples the 300 admitted records (at 100%), no more"
    );
    let again = claimed_batch(&mut w, 2, "second", 300);
    let block = w.block(vec![again]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
}

/// Rows a slash of `gonka1slashed` reads from committed state when it has two unbonding
/// entries and `others` other participants have one each.
fn rows_read_by_a_slash(others: usize) -> usize {
    use gonka_bank::BankWrite;
    use gonka_proto::stake::{Participant, UnbondingEntry};
    use gonka_stake::{bonded_pool_address, unbonding_pool_address, StakeWrite};
    let empty = MemoryState::default();
    let mut genesis = Delta::new(&empty);
    let slashed = gonka_auth::module_address("slashed");
    genesis.put_participant(&Participant {
        operator: slashed.clone(),
        bonded: "1000000".into(),
        ..Default::default()
    });
    genesis
        .mint(&bonded_pool_address(), &gonka_bank::Coin::ngnk(1_000_000))
        .unwrap();
    let entries = (0..others)
        .map(|i| (gonka_auth::module_address(&format!("other-{i}")), i as u64))
        .chain([(slashed.clone(), 1_000_000), (slashed.clone(), 1_000_001)]);
    for (operator, id) in entries {
        genesis.put_unbonding(&UnbondingEntry {
            operator,
            amount: "1000".into(),
            created_epoch: 0,
            completes_epoch: 1 + id % 3,
            id,
        });
        genesis
            .mint(&unbonding_pool_address(), &gonka_bank::Coin::ngnk(1_000))
            .unwrap();
    }
    let committed = MemoryState::from_changes(genesis.into_parts().0);
    let mut block = Delta::new(&committed);
    committed.reset_reads();
    let taken = gonka_stake::slash(&mut block, &slashed, 200_000, &addr("bob")).unwrap();
    assert_eq!(
        taken,
        200_000 + 2 * 200,
        "20% of the bond and of both entries"
    );
    committed.rows_read()
}

/// Attack (issue 34, item 7): every slash scanned every unbonding entry of the chain, in
/// `begin_block` and unmetered, and an unstake of 1 ngnk made a new entry for one fee: a
/// participant could make every later slash (of anyone) as slow as it liked. Entries are now
/// indexed by operator (a slash reads its operator's alone), an unstake is at least
/// `min_unstake` unless it unstakes everything left, unstakes completing in one epoch share
/// an entry, and a participant has at most `max_unbonding_entries`.
#[test]
fn unbonding_entries_cannot_be_spammed_to_slow_every_slash() {
    let few = rows_read_by_a_slash(3);
    let many = rows_read_by_a_slash(2_000);
    assert_eq!(
        many, few,
        "a slash read {few} committed rows beside 3 other entries and {many} beside 2,000"
    );

    let mut setup = Setup::new(4, BOND);
    setup.stake.max_unbonding_entries = 2;
    let mut w = World::with_genesis(setup, |_| {});
    let min_unstake: u128 = 10;
    let dust = w.tx("p1", vec![unstake_msg("p1", 1)]);
    let block = w.block(vec![dust]);
    assert_failed(
        block.result(0),
        "stake",
        14,
        "at least 10ngnk (min_unstake)",
    );
    let entries = |w: &World| {
        w.query::<q::stake::Unbonding>(gonka_proto::stake::QueryUnbondingRequest {
            operator: addr("p1"),
            pagination: None,
        })
        .entries
    };
    assert!(entries(&w).is_empty(), "the refused unstake left nothing");
    // Two unstakes in one epoch share one entry.
    let txs = vec![
        w.tx("p1", vec![unstake_msg("p1", min_unstake)]),
        w.tx("p1", vec![unstake_msg("p1", 2 * min_unstake)]),
    ];
    let block = w.block(txs);
    assert_eq!(block.result(1).code, 0, "{}", block.result(1).log);
    let shared = entries(&w);
    assert_eq!(shared.len(), 1, "{shared:?}");
    assert_eq!(shared[0].amount, (3 * min_unstake).to_string());
    // A second epoch's unstake makes the second entry; a third is refused until one is paid.
    let epoch = w.current_epoch();
    while w.current_epoch() == epoch {
        w.block(vec![]);
    }
    let tx = w.tx("p1", vec![unstake_msg("p1", min_unstake)]);
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    while w.current_epoch() == epoch + 1 {
        w.block(vec![]);
    }
    assert_eq!(
        entries(&w).len(),
        2,
        "the first entry is paid only at the end of this epoch"
    );
    let tx = w.tx("p1", vec![unstake_msg("p1", min_unstake)]);
    let block = w.block(vec![tx]);
    assert_failed(
        block.result(0),
        "stake",
        15,
        "already has 2 unbonding entries",
    );
    // Unstaking everything left is always allowed, however small the rest.
    let bonded: u128 = w
        .query::<q::stake::Participant>(gonka_proto::stake::QueryParticipantRequest {
            operator: addr("p2"),
        })
        .participant
        .unwrap()
        .bonded
        .parse()
        .unwrap();
    let txs = vec![
        w.tx("p2", vec![unstake_msg("p2", bonded - 5)]),
        w.tx("p2", vec![unstake_msg("p2", 5)]),
    ];
    let block = w.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(block.result(1).code, 0, "{}", block.result(1).log);
}
