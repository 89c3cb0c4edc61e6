//! x/inference through the ABCI harness with ordinary signed txs: the registry (happy paths
//! and every rejection, which changes nothing), work batches (payment, commission, work
//! credit, stored and queryable records, events), a requester who cannot pay refused alone,
//! every bad record refused alone with its code while the good records of its batch are
//! stored, and a batch that is too large or not from a transfer agent failing as a whole.
//!
//! Every block goes through `World::block`, which checks that balances sum to the supply,
//! that the supply does not change outside epoch ends (so inference moves funds, never mints
//! or burns them), and stake's invariants.

mod common;
mod support;

use gonka_client::tx::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_submit_work_batch,
    msg_update_node,
};
use gonka_proto::inference as pb;
use gonka_proto::inference::WorkRecord;
use gonka_proto::query::{self as q, Query};
use gonka_sdk::Any;
use k256::ecdsa::signature::Verifier;
use k256::ecdsa::{Signature, VerifyingKey};
use k256::sha2::{Digest, Sha256};
use serde_json::json;
use support::*;
use tendermint_proto::v0_38::abci::ExecTxResult;

use crate::common::key;

const LLAMA: &str = "meta/llama-8b";
const QWEN: &str = "qwen/72b";
const LLAMA_PRICE: u128 = 10;
const QWEN_PRICE: u128 = 50;
const TA: &str = "p2";
/// Liquid balance of the poor requester: less than any record below costs.
const CAROL: u128 = 100;
/// n0 of host p0 (key seed 10) and n1 of host p1 (key seed 11).
const N0: Exec<'static> = exec("p0", "n0", 10);
const N1: Exec<'static> = exec("p1", "n1", 11);

fn setup() -> Setup {
    let mut setup = Setup::new(3, 1_000_000);
    // No epoch ends during these tests, so rewards never move balances.
    setup.epoch_length = 1_000;
    setup.accounts.push(("carol".into(), CAROL));
    setup
}

fn inference_genesis() -> serde_json::Value {
    json!({
        "params": {"max_records_per_batch": 4, "max_tokens_per_record": 100000, "payload_retention_blocks": 1000},
        "models": [
            {"id": LLAMA, "price_per_token": LLAMA_PRICE.to_string(), "min_vram_mib": 16000},
            {"id": QWEN, "price_per_token": QWEN_PRICE.to_string(), "min_vram_mib": 80000},
        ],
    })
}

fn world() -> World {
    World::with_genesis(setup(), |state| state["inference"] = inference_genesis())
}

/// n0 (host p0, key seed 10) serves llama; n1 (host p1, key seed 11) serves both.
fn registered_world() -> World {
    let mut world = world();
    let txs = vec![
        world.tx(TA, vec![register_ta(TA, "https://ta.example:8443")]),
        world.tx(
            "p0",
            vec![msg_register_node(
                &addr("p0"),
                &node_spec("p0", "n0", &[LLAMA], 24_000, 10),
            )],
        ),
        world.tx(
            "p1",
            vec![msg_register_node(
                &addr("p1"),
                &node_spec("p1", "n1", &[LLAMA, QWEN], 80_000, 11),
            )],
        ),
    ];
    let block = world.block(txs);
    for i in 0..3 {
        assert_eq!(block.result(i).code, 0, "{}", block.result(i).log);
    }
    world
}

/// A record by `requester` for the transfer agent `TA`.
fn record(
    requester: &str,
    nonce: &str,
    model: &str,
    on: Exec<'_>,
    tokens: (u64, u64),
    commission: u128,
) -> WorkRecord {
    work_record(requester, TA, nonce, model, on, tokens, commission)
}

fn batch(records: Vec<WorkRecord>) -> Any {
    msg_submit_work_batch(&addr(TA), records)
}

fn assert_code(result: &ExecTxResult, code: u32, what: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("inference", code),
        "{what}: {}",
        result.log
    );
    assert!(!result.log.is_empty(), "{what}: empty log");
}

fn stored(world: &World, id: &str) -> Option<pb::StoredRecord> {
    let response = world.chain.query(
        q::inference::Record::PATH,
        prost::Message::encode_to_vec(&pb::QueryRecordRequest {
            inference_id: id.into(),
        }),
    );
    if response.code != 0 {
        assert_eq!(
            (response.codespace.as_str(), response.code),
            ("inference", 20)
        );
        return None;
    }
    let decoded: pb::QueryRecordResponse = prost::Message::decode(response.value.as_ref()).unwrap();
    decoded.record
}

// ---------------------------------------------------------------------------------------
// Registry

#[test]
fn registry_happy_paths_and_queries() {
    let mut world = registered_world();
    let models: pb::QueryModelsResponse =
        world.query::<q::inference::Models>(pb::QueryModelsRequest::default());
    assert_eq!(
        models
            .models
            .iter()
            .map(|m| m.id.as_str())
            .collect::<Vec<_>>(),
        [LLAMA, QWEN]
    );
    let params: pb::QueryParamsResponse =
        world.query::<q::inference::Params>(pb::QueryParamsRequest {});
    assert_eq!(params.params.unwrap().max_records_per_batch, 4);
    let agents: pb::QueryTransferAgentsResponse =
        world.query::<q::inference::TransferAgents>(pb::QueryTransferAgentsRequest::default());
    assert_eq!(agents.transfer_agents.len(), 1);
    assert_eq!(agents.transfer_agents[0].address, addr(TA));
    assert_eq!(agents.transfer_agents[0].url, "https://ta.example:8443");

    let node: pb::QueryNodeResponse = world.query::<q::inference::Node>(pb::QueryNodeRequest {
        node_id: "n1".into(),
    });
    let node = node.node.unwrap();
    assert_eq!(
        (node.host.as_str(), node.vram_mib),
        (addr("p1").as_str(), 80_000)
    );
    assert_eq!(node.pubkey, pubkey(&node_key(11)));
    let of_p0: pb::QueryNodesResponse = world.query::<q::inference::Nodes>(pb::QueryNodesRequest {
        host: addr("p0"),
        ..Default::default()
    });
    assert_eq!(of_p0.nodes.len(), 1);

    // p0 upgrades n0 to serve qwen too; p1 removes n1; the TA updates its URL.
    let upgrade = world.tx(
        "p0",
        vec![msg_update_node(
            &addr("p0"),
            &node_spec("p0", "n0", &[QWEN, LLAMA], 96_000, 12),
        )],
    );
    let remove = world.tx("p1", vec![msg_remove_node(&addr("p1"), "n1")]);
    let ta = world.tx(
        TA,
        vec![msg_register_transfer_agent(
            &addr(TA),
            "https://ta2.example",
            &key(TA).public_key().to_bytes(),
        )],
    );
    let block = world.block(vec![upgrade, remove, ta]);
    for i in 0..3 {
        assert_eq!(block.result(i).code, 0, "{}", block.result(i).log);
    }
    assert_eq!(tx_events(block.result(0), "node_updated").len(), 1);
    assert_eq!(
        tx_events(block.result(1), "node_removed")[0]["node_id"],
        "n1"
    );
    let all: pb::QueryNodesResponse =
        world.query::<q::inference::Nodes>(pb::QueryNodesRequest::default());
    assert_eq!(all.nodes.len(), 1);
    let n0 = &all.nodes[0];
    assert_eq!(n0.models, [LLAMA, QWEN], "models are stored sorted");
    assert_eq!(
        (n0.vram_mib, n0.pubkey.clone()),
        (96_000, pubkey(&node_key(12)))
    );
    let missing = world.chain.query(
        q::inference::Node::PATH,
        prost::Message::encode_to_vec(&pb::QueryNodeRequest {
            node_id: "n1".into(),
        }),
    );
    assert_eq!((missing.codespace.as_str(), missing.code), ("inference", 8));
    let agents: pb::QueryTransferAgentsResponse =
        world.query::<q::inference::TransferAgents>(pb::QueryTransferAgentsRequest::default());
    assert_eq!(agents.transfer_agents[0].url, "https://ta2.example");
}

#[test]
fn registry_rejections_have_distinct_codes_and_change_nothing() {
    let mut world = registered_world();
    // p1 is jailed, so it no longer counts as staked.
    let jailing = world.tx(ORACLE, vec![jail("p1")]);
    assert_eq!(world.block(vec![jailing]).result(0).code, 0);
    let before = world.raw_prefix(b"inference/");

    let cases: Vec<(&str, Any, u32, &str)> = vec![
        (
            "bob",
            msg_register_node(&addr("bob"), &node_spec("bob", "nb", &[LLAMA], 24_000, 20)),
            4,
            "is not a participant",
        ),
        (
            "bob",
            msg_register_transfer_agent(
                &addr("bob"),
                "https://bob.ta",
                &key("bob").public_key().to_bytes(),
            ),
            4,
            "is not a participant",
        ),
        (
            "p1",
            msg_register_node(&addr("p1"), &node_spec("p1", "nj", &[LLAMA], 24_000, 21)),
            4,
            "is jailed",
        ),
        (
            "p0",
            msg_register_node(&addr("p0"), &node_spec("p0", "n0", &[LLAMA], 24_000, 22)),
            5,
            "already registered",
        ),
        (
            "p0",
            msg_register_node(
                &addr("p0"),
                &node_spec("p0", "nu", &["no/such-model"], 24_000, 23),
            ),
            6,
            "does not price",
        ),
        (
            "p0",
            msg_register_node(
                &addr("p0"),
                &node_spec("p0", "nv", &[LLAMA, QWEN], 40_000, 24),
            ),
            7,
            "needs at least 80000 MiB",
        ),
        (
            "p0",
            msg_remove_node(&addr("p0"), "nx"),
            8,
            "not registered",
        ),
        (
            "p0",
            msg_update_node(&addr("p0"), &node_spec("p0", "n1", &[LLAMA], 24_000, 25)),
            9,
            "is hosted by",
        ),
    ];
    let txs: Vec<Vec<u8>> = cases
        .iter()
        .map(|(signer, msg, _, _)| world.tx(signer, vec![msg.clone()]))
        .collect();
    // Stateless rejections: refused before the ante step, so they use no sequence.
    let mut bad_key = node_spec("p0", "nk", &[LLAMA], 24_000, 26);
    bad_key.pubkey = vec![9; 33];
    let mut bad_url = node_spec("p0", "nw", &[LLAMA], 24_000, 27);
    bad_url.endpoint = "ftp://x".into();
    // A node declaring it serves u32::MAX requests at once would draw a TA's traffic.
    let mut greedy = node_spec("p0", "ng", &[LLAMA], 24_000, 29);
    greedy.max_concurrency = u64::from(u32::MAX);
    let stateless: Vec<(Any, u32, &str)> = vec![
        (
            msg_register_node(&addr("p0"), &bad_key),
            10,
            "not a curve point",
        ),
        (msg_register_node(&addr("p0"), &bad_url), 10, "http://"),
        (
            msg_register_node(&addr("p0"), &greedy),
            10,
            "must accept 1 to 4096 concurrent requests",
        ),
        (
            msg_register_node(
                &addr("p0"),
                &node_spec("p0", "bad/id", &[LLAMA], 24_000, 28),
            ),
            10,
            "node_id",
        ),
        (
            msg_register_transfer_agent(&addr("p0"), "https://x.example", &[1, 2]),
            11,
            "33-byte",
        ),
    ];
    let mut all = txs;
    for (msg, _, _) in &stateless {
        all.push(world.tx_unsequenced("p0", vec![msg.clone()]));
    }
    let block = world.block(all);
    let expected = cases
        .iter()
        .map(|(_, _, code, log)| (*code, *log))
        .chain(stateless.iter().map(|(_, code, log)| (*code, *log)));
    for (i, (code, log)) in expected.enumerate() {
        let result = block.result(i);
        assert_code(result, code, &format!("case {i}"));
        assert!(
            result.log.contains(log),
            "case {i}: {:?} lacks {log:?}",
            result.log
        );
    }
    assert_eq!(
        world.raw_prefix(b"inference/"),
        before,
        "a rejection changed inference state"
    );
}

// ---------------------------------------------------------------------------------------
// Work batches

#[test]
fn batch_charges_requesters_pays_hosts_and_ta_credits_work_and_stores_records() {
    let mut world = registered_world();
    let supply = world.supply();
    let balances = |w: &World| -> Vec<u128> {
        ["alice", "bob", "p0", "p1", TA]
            .iter()
            .map(|l| w.balance_of(l))
            .collect()
    };
    let before = balances(&world);
    let records = vec![
        record("alice", "a-1", LLAMA, N0, (100, 50), 7),
        record("bob", "b-1", QWEN, N1, (10, 20), 0),
        record("alice", "a-2", LLAMA, N1, (1, 1), 3),
    ];
    let ids: Vec<String> = records.iter().map(|r| r.inference_id.clone()).collect();
    let tx = world.tx(TA, vec![batch(records)]);
    let block = world.block(vec![tx]);
    let result = block.result(0);
    assert_eq!(result.code, 0, "{}", result.log);

    let (a1, b1, a2) = (150 * LLAMA_PRICE, 30 * QWEN_PRICE, 2 * LLAMA_PRICE);
    let after = balances(&world);
    assert_eq!(after[0], before[0] - a1 - 7 - a2 - 3, "alice");
    assert_eq!(after[1], before[1] - b1, "bob");
    assert_eq!(after[2], before[2] + a1, "host p0");
    assert_eq!(after[3], before[3] + b1 + a2, "host p1");
    assert_eq!(after[4], before[4] + 7 + 3 - FEE, "transfer agent");
    assert_eq!(world.supply(), supply, "inference must not mint or burn");

    let work = world.work(0);
    let expected_work: std::collections::BTreeMap<String, u64> =
        [(addr("p0"), 150), (addr("p1"), 32)].into_iter().collect();
    assert_eq!(
        work.into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
        expected_work
    );

    let recorded = tx_events(result, "inference_record");
    assert_eq!(recorded.len(), 3);
    assert_eq!(recorded[0]["id"], ids[0]);
    assert_eq!(recorded[0]["requester"], addr("alice"));
    assert_eq!(recorded[0]["executor"], "n0");
    assert_eq!(recorded[0]["model"], LLAMA);
    assert_eq!(recorded[0]["tokens"], "150");
    assert_eq!(recorded[0]["cost"], format!("{a1}ngnk"));
    assert!(recorded.iter().all(|e| e["outcome"] == "stored"));
    assert_eq!(tx_events(result, "work_batch")[0]["stored"], "3");

    let first = stored(&world, &ids[0]).unwrap();
    assert_eq!(first.epoch, 0);
    assert_eq!(first.height, world.chain.height());
    assert_eq!(first.executor_host, addr("p0"));
    assert_eq!(first.transfer_agent, addr(TA));
    assert_eq!(first.cost, a1.to_string());
    assert_eq!(first.record.unwrap().prompt_tokens, 100);
    let of_epoch: pb::QueryRecordsResponse =
        world.query::<q::inference::Records>(pb::QueryRecordsRequest {
            epoch: 0,
            executor: String::new(),
            ..Default::default()
        });
    assert_eq!(of_epoch.records.len(), 3);
    let of_n1: pb::QueryRecordsResponse =
        world.query::<q::inference::Records>(pb::QueryRecordsRequest {
            epoch: 0,
            executor: "n1".into(),
            ..Default::default()
        });
    let mut n1_ids: Vec<String> = of_n1
        .records
        .iter()
        .map(|r| r.record.as_ref().unwrap().inference_id.clone())
        .collect();
    n1_ids.sort();
    let mut expected = vec![ids[1].clone(), ids[2].clone()];
    expected.sort();
    assert_eq!(n1_ids, expected);
    let later: pb::QueryRecordsResponse =
        world.query::<q::inference::Records>(pb::QueryRecordsRequest {
            epoch: 1,
            executor: String::new(),
            ..Default::default()
        });
    assert!(later.records.is_empty());
}

#[test]
fn a_requester_who_cannot_pay_is_refused_alone() {
    let mut world = registered_world();
    let (alice, carol, p0) = (
        world.balance_of("alice"),
        world.balance_of("carol"),
        world.balance_of("p0"),
    );
    // carol holds 100 ngnk; her record costs 10 × 10 + 1 commission = 101.
    let poor = record("carol", "c-1", LLAMA, N0, (5, 5), 1);
    let fine = record("alice", "a-9", LLAMA, N0, (3, 4), 0);
    let (poor_id, fine_id) = (poor.inference_id.clone(), fine.inference_id.clone());
    let tx = world.tx(TA, vec![batch(vec![poor.clone(), fine])]);
    let block = world.block(vec![tx]);
    let result = block.result(0);
    assert_eq!(result.code, 0, "{}", result.log);

    assert_eq!(world.balance_of("carol"), carol, "carol was not charged");
    assert_eq!(world.balance_of("alice"), alice - 7 * LLAMA_PRICE);
    assert_eq!(world.balance_of("p0"), p0 + 7 * LLAMA_PRICE);
    assert!(
        stored(&world, &poor_id).is_none(),
        "refused record must not be stored"
    );
    assert!(stored(&world, &fine_id).is_some());
    assert_eq!(world.work(0), vec![(addr("p0"), 7)]);

    assert_eq!(
        record_outcomes(result),
        vec![
            (poor_id.clone(), "refused".to_string(), "26".to_string()),
            (fine_id, "stored".to_string(), String::new())
        ]
    );
    assert_refused(result, 0, &poor_id, 26, "holds 100ngnk but owes 101ngnk");
    let summary = &tx_events(result, "work_batch")[0];
    assert_eq!(
        (summary["stored"].as_str(), summary["refused"].as_str()),
        ("1", "1")
    );

    // The refused record twice in one batch: the copy is a duplicate within the batch.
    let tx = world.tx(TA, vec![batch(vec![poor.clone(), poor])]);
    let block = world.block(vec![tx]);
    assert_refused(block.result(0), 0, &poor_id, 26, "owes 101ngnk");
    assert_refused(
        block.result(0),
        1,
        &poor_id,
        18,
        "appears earlier in this batch",
    );
    assert_eq!(world.balance_of("carol"), carol, "carol was not charged");
}

#[test]
fn a_bad_record_is_refused_alone_with_its_code_and_the_good_ones_are_stored() {
    let mut world = registered_world();
    // One stored record, so a resubmission is a duplicate.
    let first = record("alice", "dup", LLAMA, N0, (1, 1), 0);
    let tx = world.tx(TA, vec![batch(vec![first.clone()])]);
    assert_eq!(world.block(vec![tx]).result(0).code, 0);

    // Good records are bob's, (2, 2) tokens and a commission of 1 each; bad ones alice's.
    let good = |i: usize| record("bob", &format!("good-{i}"), LLAMA, N0, (2, 2), 1);
    let forged_executor = record("alice", "fe", LLAMA, exec("p0", "n0", 99), (1, 1), 0);
    let mut forged_requester = record("alice", "fr", LLAMA, N0, (1, 1), 0);
    forged_requester.requester_signature =
        record("alice", "other", LLAMA, N0, (1, 1), 0).requester_signature;
    let mut stolen_key = record("alice", "sk", LLAMA, N0, (1, 1), 0);
    stolen_key.requester_pubkey = key("bob").public_key().to_bytes();
    let mut wrong_id = record("alice", "wi", LLAMA, N0, (1, 1), 0);
    wrong_id.inference_id = hex::encode(digest("something else"));
    let mut raised_commission = record("alice", "rc", LLAMA, N0, (1, 1), 1);
    raised_commission.commission = "1000".into();
    let mut bad_nonce = record("alice", "bn", LLAMA, N0, (1, 1), 0);
    bad_nonce.nonce = "has space".into();
    let mut malformed_sig = record("alice", "ms", LLAMA, N0, (1, 1), 0);
    malformed_sig.executor_signature.truncate(10);
    let unknown_model = record("alice", "um", "no/model", N0, (1, 1), 0);
    let not_served = record("alice", "ns", QWEN, N0, (1, 1), 0);
    let unknown_node = record("alice", "un", LLAMA, exec("p0", "zz", 10), (1, 1), 0);
    let too_many_tokens = record("alice", "tm", LLAMA, N0, (100_000, 1), 0);

    let balances = |w: &World| -> Vec<u128> {
        ["alice", "bob", "p0", TA]
            .iter()
            .map(|l| w.balance_of(l))
            .collect()
    };
    let before = balances(&world);
    let work_before = world.work(0);

    // (bad record, code, reason fragment): each in a batch after a good record.
    let mut cases: Vec<(WorkRecord, u32, &str)> = vec![
        (forged_executor, 17, "executor signature"),
        (malformed_sig, 17, "(10 bytes)"),
        (first.clone(), 18, "already recorded"),
        (forged_requester, 16, "requester signature"),
        (stolen_key, 21, "belongs to"),
        (wrong_id, 15, "lowercase hex"),
        (
            raised_commission,
            22,
            "the requester signed different terms",
        ),
        (bad_nonce, 14, "printable ASCII"),
        (unknown_model, 6, "does not price"),
        (not_served, 19, "does not serve"),
        (unknown_node, 8, "not registered"),
        (too_many_tokens, 14, "max_tokens_per_record"),
    ];
    // The same record twice in one batch: the first is stored, the second refused.
    cases.push((good(cases.len()), 18, "already recorded"));
    let goods: Vec<WorkRecord> = (0..cases.len()).map(good).collect();
    let mut txs: Vec<Vec<u8>> = goods
        .iter()
        .zip(&cases)
        .map(|(good, (bad, _, _))| world.tx(TA, vec![batch(vec![good.clone(), bad.clone()])]))
        .collect();
    // Batches that fail as a whole: too many records, and a submitter that is not a
    // transfer agent.
    let many: Vec<WorkRecord> = (0..5)
        .map(|i| record("bob", &format!("many-{i}"), LLAMA, N0, (1, 1), 0))
        .collect();
    let not_ta = record("bob", "not-ta", LLAMA, N0, (2, 2), 1);
    txs.push(world.tx(TA, vec![batch(many.clone())]));
    txs.push(world.tx(
        "alice",
        vec![msg_submit_work_batch(&addr("alice"), vec![not_ta.clone()])],
    ));
    let block = world.block(txs);
    for (i, (good, (bad, code, fragment))) in goods.iter().zip(&cases).enumerate() {
        let result = block.result(i);
        assert_eq!(result.code, 0, "case {i}: {}", result.log);
        let outcomes = record_outcomes(result);
        assert_eq!(
            outcomes[0],
            (good.inference_id.clone(), "stored".into(), String::new()),
            "case {i}"
        );
        assert_refused(result, 1, &bad.inference_id, *code, fragment);
        let summary = &tx_events(result, "work_batch")[0];
        assert_eq!(
            (summary["stored"].as_str(), summary["refused"].as_str()),
            ("1", "1"),
            "case {i}"
        );
    }
    let too_many = block.result(cases.len());
    assert_code(too_many, 13, "too many records");
    assert!(
        too_many.log.contains("at most 4 records"),
        "{}",
        too_many.log
    );
    let not_agent = block.result(cases.len() + 1);
    assert_code(not_agent, 12, "not a transfer agent");
    for result in [too_many, not_agent] {
        assert!(tx_events(result, "inference_record").is_empty());
    }

    // Exactly the good records (and the first one) are stored; bad ones and the records of
    // failed batches are not.
    let of_epoch: pb::QueryRecordsResponse =
        world.query::<q::inference::Records>(pb::QueryRecordsRequest {
            epoch: 0,
            ..Default::default()
        });
    let mut got: Vec<String> = of_epoch
        .records
        .iter()
        .map(|r| r.record.as_ref().unwrap().inference_id.clone())
        .collect();
    got.sort();
    let mut want: Vec<String> = goods
        .iter()
        .chain([&first])
        .map(|r| r.inference_id.clone())
        .collect();
    want.sort();
    assert_eq!(got, want);
    for bad in cases
        .iter()
        .map(|(bad, _, _)| bad)
        .chain(&many)
        .chain([&not_ta])
    {
        if bad.inference_id != first.inference_id && !want.contains(&bad.inference_id) {
            assert!(stored(&world, &bad.inference_id).is_none());
        }
    }

    // Only the good records moved money and credited work.
    let n = goods.len() as u128;
    let cost = 4 * LLAMA_PRICE;
    let after = balances(&world);
    assert_eq!(
        after[0],
        before[0] - FEE,
        "alice pays only her failed tx's fee"
    );
    assert_eq!(after[1], before[1] - n * (cost + 1), "bob pays the goods");
    assert_eq!(after[2], before[2] + n * cost, "host");
    assert_eq!(
        after[3],
        before[3] + n - (n + 1) * FEE,
        "the TA earns the goods' commissions and pays its fees"
    );
    let mut work_after = work_before;
    work_after[0].1 += 4 * goods.len() as u64;
    assert_eq!(world.work(0), work_after);
}

/// Appends `text` as the signed formats encode a string: u32 big-endian length, UTF-8.
fn push_text(layout: &mut Vec<u8>, text: &str) {
    layout.extend_from_slice(&(text.len() as u32).to_be_bytes());
    layout.extend_from_slice(text.as_bytes());
}

/// The bytes a requester, an executor and a node key's proof sign, rebuilt here byte by
/// byte from the layouts `proto/src/signing.rs` documents (domain strings written out,
/// big-endian integers of the stated widths, length-prefixed strings), equal what the
/// client signs; the signatures verify over them with plain ECDSA; the chain's checks agree;
/// and the chain stores the client's record and refuses it once a signed field is changed.
#[test]
fn client_and_chain_agree_on_signed_bytes() {
    let input = request(TA, "z", LLAMA, N0, (4, 5), 7);
    let r = signed_record("alice", 10, &input);

    // SHA-256("gonka/request/v2" ‖ chain id ‖ body hash ‖ timestamp u64 ‖ commission u128 ‖
    // transfer agent ‖ model ‖ max price per token u128 ‖ max completion tokens u64 ‖ nonce).
    let mut layout = b"gonka/request/v2".to_vec();
    push_text(&mut layout, CHAIN_ID);
    layout.extend_from_slice(&digest("prompt z"));
    layout.extend_from_slice(&1_700_000_000u64.to_be_bytes());
    layout.extend_from_slice(&7u128.to_be_bytes());
    push_text(&mut layout, &addr(TA));
    push_text(&mut layout, LLAMA);
    layout.extend_from_slice(&MAX_PRICE_PER_TOKEN.to_be_bytes());
    layout.extend_from_slice(&5u64.to_be_bytes());
    push_text(&mut layout, "z");
    let request_hash: [u8; 32] = Sha256::digest(&layout).into();
    assert_eq!(input.terms.hash(), request_hash);
    assert_eq!(r.request_hash, request_hash);
    assert_eq!(r.inference_id, hex::encode(request_hash));
    assert_eq!(
        (
            r.transfer_agent.as_str(),
            r.max_price_per_token.as_str(),
            r.max_completion_tokens
        ),
        (addr(TA).as_str(), "1000000", 5)
    );

    // SHA-256("gonka/output/text/v1" ‖ salt ‖ response hash): the salted commitment.
    let mut layout = b"gonka/output/text/v1".to_vec();
    layout.extend_from_slice(&salt("z"));
    layout.extend_from_slice(&truth("z"));
    let output_commitment: [u8; 32] = Sha256::digest(&layout).into();
    assert_eq!(r.output_commitment, output_commitment);
    assert_eq!(commitment("z", &truth("z")), output_commitment);

    // SHA-256("gonka/receipt/v2" ‖ request hash ‖ output commitment ‖ prompt tokens u64 ‖
    // completion tokens u64 ‖ node id ‖ host).
    let mut layout = b"gonka/receipt/v2".to_vec();
    layout.extend_from_slice(&request_hash);
    layout.extend_from_slice(&output_commitment);
    layout.extend_from_slice(&4u64.to_be_bytes());
    layout.extend_from_slice(&5u64.to_be_bytes());
    push_text(&mut layout, "n0");
    push_text(&mut layout, &addr("p0"));
    let receipt_bytes: [u8; 32] = Sha256::digest(&layout).into();
    let receipt = gonka_inference::ReceiptTerms {
        request_hash,
        output_commitment,
        prompt_tokens: 4,
        completion_tokens: 5,
        node_id: "n0".into(),
        host: addr("p0"),
    };
    assert_eq!(receipt.sign_bytes(), receipt_bytes);

    // SHA-256("gonka/node-key/v1" ‖ chain id ‖ host ‖ node id ‖ u32 length ‖ public key).
    let mut layout = b"gonka/node-key/v1".to_vec();
    push_text(&mut layout, CHAIN_ID);
    push_text(&mut layout, &addr("p0"));
    push_text(&mut layout, "n0");
    layout.extend_from_slice(&33u32.to_be_bytes());
    layout.extend_from_slice(&pubkey(&node_key(10)));
    let proof_bytes: [u8; 32] = Sha256::digest(&layout).into();
    assert_eq!(
        gonka_inference::node_key_proof_bytes(CHAIN_ID, &addr("p0"), "n0", &pubkey(&node_key(10))),
        proof_bytes
    );

    // Every signature is ECDSA (SHA-256 prehash) over exactly those 32 bytes.
    let verify = |key: &VerifyingKey, message: &[u8; 32], signature: &[u8]| {
        key.verify(message, &Signature::from_slice(signature).unwrap())
            .is_ok()
    };
    let alice = VerifyingKey::from_sec1_bytes(&r.requester_pubkey).unwrap();
    assert!(verify(&alice, &request_hash, &r.requester_signature));
    assert!(verify(
        node_key(10).verifying_key(),
        &receipt_bytes,
        &r.executor_signature
    ));
    let spec = node_spec("p0", "n0", &[LLAMA], 24_000, 10);
    assert!(verify(
        node_key(10).verifying_key(),
        &proof_bytes,
        &spec.key_proof
    ));

    // The chain's checks agree: the signatures verify, a changed field does not.
    let ok = gonka_inference::signature_ok;
    assert!(ok(
        &r.requester_pubkey,
        &request_hash,
        &r.requester_signature
    ));
    assert!(!ok(
        &r.requester_pubkey,
        &digest("another request"),
        &r.requester_signature
    ));
    let n0_key = pubkey(&node_key(10));
    assert!(ok(&n0_key, &receipt_bytes, &r.executor_signature));
    let changes: [fn(&mut gonka_inference::ReceiptTerms); 4] = [
        |t| t.completion_tokens += 1,
        |t| t.prompt_tokens += 1,
        |t| t.output_commitment = [0; 32],
        |t| t.host = "someone else".into(),
    ];
    for change in changes {
        let mut changed = receipt.clone();
        change(&mut changed);
        assert!(!ok(&n0_key, &changed.sign_bytes(), &r.executor_signature));
    }
    assert!(ok(&n0_key, &proof_bytes, &spec.key_proof));
    // The record reveals nothing that opens its commitment; the salt does, later.
    assert!(gonka_inference::opens(&r, &salt("z"), &truth("z")));
    assert!(!gonka_inference::opens(&r, &salt("y"), &truth("z")));
    // SHA-256("gonka/result/v1" ‖ address ‖ answer hash ‖ prompt tokens u64 ‖ completion
    // tokens u64): a re-execution's commitment, matched against the revealed answer.
    let validator = addr("bob");
    let mut layout = b"gonka/result/v1".to_vec();
    layout.extend_from_slice(&(validator.len() as u32).to_be_bytes());
    layout.extend_from_slice(validator.as_bytes());
    layout.extend_from_slice(&truth("z"));
    layout.extend_from_slice(&4u64.to_be_bytes());
    layout.extend_from_slice(&5u64.to_be_bytes());
    let result: [u8; 32] = Sha256::digest(&layout).into();
    assert_eq!(found(truth("z"), (4, 5)).commitment(&validator), result);
    assert!(gonka_inference::result_matches(
        &r,
        &truth("z"),
        &validator,
        &result
    ));
    let other = |answer, tokens| found(answer, tokens).commitment(&validator);
    assert!(
        !gonka_inference::result_matches(&r, &truth("z"), &validator, &other(lie("z"), (4, 5))),
        "another answer"
    );
    assert!(
        !gonka_inference::result_matches(&r, &truth("z"), &validator, &other(truth("z"), (4, 6))),
        "another count"
    );
    assert!(
        !gonka_inference::result_matches(&r, &truth("z"), &addr("carol"), &result),
        "another author"
    );
    assert_eq!(
        gonka_auth::address_of_pubkey(&r.requester_pubkey),
        Some(addr("alice"))
    );

    // The chain stores the record as signed, and refuses it with a signed field changed.
    let mut world = registered_world();
    let mut more_completion = r.clone();
    more_completion.max_completion_tokens = 6;
    let mut more_prompt = r.clone();
    more_prompt.prompt_tokens = 5;
    let mut other_model = r.clone();
    other_model.model = QWEN.into();
    let changed = world.tx(
        TA,
        vec![batch(vec![more_completion, more_prompt, other_model])],
    );
    let signed = world.tx(TA, vec![batch(vec![r.clone()])]);
    let block = world.block(vec![changed, signed]);
    let result = block.result(0);
    assert_refused(result, 0, &r.inference_id, 22, "request/v2");
    assert_refused(result, 1, &r.inference_id, 17, "executor signature");
    assert_refused(result, 2, &r.inference_id, 22, "request/v2");
    assert_eq!(
        record_outcomes(block.result(1)),
        vec![(r.inference_id.clone(), "stored".into(), String::new())]
    );
    assert_eq!(stored(&world, &r.inference_id).unwrap().record.unwrap(), r);
}

#[test]
fn invalid_inference_genesis_is_refused() {
    use gonka_sdk::GenesisJson;
    let dir = state_dir();
    let store = gonka_store::Store::open(&dir.path().join("state.redb")).unwrap();
    let cases = [
        (
            json!({"params": {"max_records_per_batch": 0, "max_tokens_per_record": 1}}),
            2,
            "max_records_per_batch",
        ),
        (
            json!({"models": [{"id": "a", "price_per_token": "1"}, {"id": "a", "price_per_token": "2"}]}),
            3,
            "twice",
        ),
        (
            json!({"models": [{"id": "a", "price_per_token": "-1"}]}),
            3,
            "price_per_token",
        ),
        (
            json!({"models": [{"id": "has space", "price_per_token": "1"}]}),
            3,
            "printable",
        ),
    ];
    for (section, code, fragment) in cases {
        let mut state = gonka_sdk::Delta::new(&store);
        let err = gonka_inference::Inference
            .init_genesis_json(&mut state, Some(&section))
            .unwrap_err();
        assert_eq!(
            (err.codespace, err.code),
            ("inference", code),
            "{}",
            err.log
        );
        assert!(err.log.contains(fragment), "{}", err.log);
    }
}
