//! x/inference through the ABCI harness with ordinary signed txs: the registry (happy paths
//! and every rejection, which changes nothing), the signed formats byte by byte, and the
//! module's genesis. Records are settled through x/settlement's committed batches
//! (`settlement.rs`).
//!
//! Every block goes through `World::block`, which checks that balances sum to the supply,
//! that the supply does not change outside epoch ends (so inference moves funds, never mints
//! or burns them), and stake's invariants.

mod common;
mod support;

use gonka_client::tx::{
    msg_register_node, msg_register_transfer_agent, msg_remove_node, msg_update_node,
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
/// n0 of host p0 (key seed 10).
const N0: Exec<'static> = exec("p0", "n0", 10);

fn setup() -> Setup {
    let mut setup = Setup::new(3, 1_000_000);
    // No epoch ends during these tests, so rewards never move balances.
    setup.epoch_length = 1_000;
    setup
}

fn inference_genesis() -> serde_json::Value {
    json!({
        "params": {"max_tokens_per_record": 100000, "payload_retention_blocks": 1000},
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

fn assert_code(result: &ExecTxResult, code: u32, what: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("inference", code),
        "{what}: {}",
        result.log
    );
    assert!(!result.log.is_empty(), "{what}: empty log");
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
    assert_eq!(params.params.unwrap().max_tokens_per_record, 100_000);
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

    // SHA-256("gonka/request/v3" ‖ chain id ‖ body hash ‖ timestamp u64 ‖ commission u128 ‖
    // transfer agent ‖ model ‖ max price per token u128 ‖ max completion tokens u64 ‖
    // max prompt tokens u64 ‖ nonce).
    let mut layout = b"gonka/request/v3".to_vec();
    push_text(&mut layout, CHAIN_ID);
    layout.extend_from_slice(&digest("prompt z"));
    layout.extend_from_slice(&1_700_000_000u64.to_be_bytes());
    layout.extend_from_slice(&7u128.to_be_bytes());
    push_text(&mut layout, &addr(TA));
    push_text(&mut layout, LLAMA);
    layout.extend_from_slice(&MAX_PRICE_PER_TOKEN.to_be_bytes());
    layout.extend_from_slice(&5u64.to_be_bytes());
    layout.extend_from_slice(&4u64.to_be_bytes());
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

    // The chain's leaf rules (what an invalid_leaf challenge proves) accept the record as
    // signed and find each changed signed field.
    let leaf = |record: &WorkRecord| gonka_proto::settlement::BatchLeaf {
        record: Some(record.clone()),
        executor_host: addr("p0"),
        cost: (9 * LLAMA_PRICE).to_string(),
        ..Default::default()
    };
    let fault = |record: &WorkRecord| {
        gonka_settlement::challenge::leaf_fault(
            CHAIN_ID,
            &addr(TA),
            1_700_000_000,
            60,
            &leaf(record),
        )
    };
    assert_eq!(fault(&r), None);
    let mut more_completion = r.clone();
    more_completion.max_completion_tokens = 6;
    let mut other_model = r.clone();
    other_model.model = QWEN.into();
    let mut other_agent = r.clone();
    other_agent.transfer_agent = addr("p1");
    let mut more_prompt_signed = r.clone();
    more_prompt_signed.max_prompt_tokens = 400;
    // A host claiming more prompt tokens than the requester signed for (it signed 4): on
    // the old chain nothing the requester signed bounded them.
    let mut longer_prompt = r.clone();
    longer_prompt.prompt_tokens = 5;
    for (changed, reason) in [
        (more_completion, "request/v3"),
        (other_model, "request/v3"),
        (more_prompt_signed, "request/v3"),
        (other_agent, "signed for transfer agent"),
        (longer_prompt, "5 prompt tokens, above the signed 4"),
    ] {
        let found = fault(&changed).expect("a changed signed field is a fault");
        assert!(found.contains(reason), "{found:?} lacks {reason:?}");
    }
}

#[test]
fn invalid_inference_genesis_is_refused() {
    use gonka_sdk::GenesisJson;
    let dir = state_dir();
    let store = gonka_store::Store::open(&dir.path().join("state.redb")).unwrap();
    let cases = [
        (
            json!({"params": {"max_tokens_per_record": 1}}),
            2,
            "payload_retention_blocks",
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
