//! The golden app hash: one fixed genesis and one fixed scenario that runs every message kind
//! of every module across two epoch boundaries must end in a recorded app hash, so any change
//! to the state layout, encoding or execution shows up here as a deliberate update.

mod common;
mod support;

use gonka_client::disputes::{msg_open_dispute, msg_submit_validation, msg_vote_dispute};
use gonka_client::pol::{
    msg_join_training, msg_publish_model, msg_submit_checkpoint, msg_verify_checkpoint,
    CheckpointHashes, ReExecuted,
};
use gonka_client::settlement::{
    cosign, msg_challenge_batch, msg_close_escrow, msg_demand_leaf, msg_open_escrow,
    msg_provide_leaf, msg_settle_batch, msg_top_up_escrow, Batch as SettlementBatch, Served,
};
use gonka_client::tx::{
    msg_register_node, msg_remove_node, msg_stake, msg_unjail, msg_unstake, msg_update_node,
};
use gonka_client::Any;
use gonka_proto::disputes as pb;
use gonka_proto::inference::WorkRecord;
use gonka_proto::pol as polpb;
use gonka_proto::query as q;
use gonka_proto::settlement::msg_challenge_batch::Kind as ChallengeKind;
use prost::Message;
use serde_json::json;
use support::*;
use tendermint_proto::v0_38::abci::ExecTxResult;

const LLAMA: &str = "meta/llama-8b";
const QWEN: &str = "qwen/72b";
/// The models' prices per token, in ngnk.
const LLAMA_PRICE: u128 = 10;
const QWEN_PRICE: u128 = 50;
/// The transfer agent (also a validator).
const TA: &str = "p5";
/// Bond of every genesis participant.
const BOND: u128 = 1_000_000;
const EPOCH_LENGTH: u64 = 11;
const MIN_DEPOSIT: u128 = 10_000;
/// What alice puts into the validation pool.
const POOL_FUNDS: u128 = 1_000_000;
/// What p3 unbonds in epoch 0 (paid back at the end of epoch 1).
const UNSTAKED: u128 = 200_000;
/// What alice, bob and carol put in escrow for the TA before its first batch.
const ALICE_ESCROW: u128 = 100_000;
const BOB_ESCROW: u128 = 50_000;
const CAROL_ESCROW: u128 = 10_000;
const PARTICIPANTS: [&str; 7] = ["p0", "p1", "p2", "p3", "p4", "p5", "dave"];

/// The recorded app hash after the scenario's last block (height 26, where the key
/// generation round that the end of epoch 1 started is final).
const GOLDEN: &str = "894e74f8d699cc93c3518ca7cd8b47600ffcdc51f72c32cd9f1eb8aa499ef49a";

/// Six genesis participants p0..p5 bonding `BOND` (p5 the transfer agent, so p1..p4 judge
/// its records); alice, bob, carol and dave funded;
/// 11-block epochs; 1-epoch unbonding and jail; 10% of each epoch's rewards to the
/// validation pool; two priced models; every record sampled, 2 blocks to validate,
/// committees of 3, 20% slashed, jailed at the first missed deadline; committed batches
/// final 3 blocks after they settle, every leaf sampled and demanded for the next block.
fn world() -> World {
    let mut setup = Setup::new(6, BOND);
    setup.epoch_length = EPOCH_LENGTH;
    setup.stake.unbonding_epochs = 1;
    setup.stake.jail_epochs = 1;
    setup.rewards.validation_share_ppm = 100_000;
    setup.accounts = ["alice", "bob", "carol", "dave"]
        .into_iter()
        .map(|label| (label.to_string(), FUNDS))
        .collect();
    let disputes = pb::Params {
        min_sample_ppm: 1_000_000,
        max_sample_ppm: 1_000_000,
        decay_validations: 20,
        validation_deadline_blocks: 2,
        dispute_deadline_blocks: 3,
        committee_size: 3,
        slash_fraction_ppm: 200_000,
        min_deposit: MIN_DEPOSIT.to_string(),
        validation_reward_ppm: 1_000_000,
        jail_after_misses: 1,
        miss_penalty_ppm: 100_000,
        dispute_window_blocks: 5,
        reveal_deadline_blocks: 2,
    };
    World::with_modules(setup, gonka_app::modules::all(), |state| {
        state["inference"] = json!({
            "params": {"max_tokens_per_record": 100000, "payload_retention_blocks": 1000},
            "models": [
                {"id": LLAMA, "price_per_token": LLAMA_PRICE.to_string(),
                    "min_vram_mib": 16000},
                {"id": QWEN, "price_per_token": QWEN_PRICE.to_string(),
                    "min_vram_mib": 80000},
            ],
        });
        state["disputes"] = json!({ "params": disputes });
        state["bls"] = json!({"params": {"dkg_slots": 4, "dkg_deal_blocks": 1,
            "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1, "beacon_keep_blocks": 1000}});
        state["settlement"]["params"]["challenge_window_blocks"] = 3.into();
        state["settlement"]["params"]["leaf_answer_blocks"] = 1.into();
        // The scenario's requests are signed at a fixed time long before the harness's.
        state["settlement"]["params"]["max_record_age_secs"] = 100_000_000.into();
        state["settlement"]["params"]["batch_keep_secs"] = 200_000_000.into();
        // Every leaf of a batch is sampled for validation.
        state["settlement"]["params"]["leaf_sample_ppm"] = 1_000_000.into();
        // Every checkpoint is re-executed; a job's budget may be small.
        state["pol"] = json!({"params": polpb::Params {
            checkpoint_sample_ppm: 1_000_000,
            verification_deadline_blocks: 2,
            dispute_deadline_blocks: 3,
            min_reward_budget: "1".into(),
            ..gonka_pol::default_params()
        }});
    })
}

/// One block fed to a chain, with what it produced.
struct Logged {
    txs: Vec<Vec<u8>>,
    app_hash: Vec<u8>,
    results: Vec<ExecTxResult>,
}

type Log = Vec<Logged>;

/// Commits a block of `txs` and logs it.
fn step(w: &mut World, log: &mut Log, txs: Vec<Vec<u8>>) -> Block {
    let block = w.block(txs.clone());
    assert_eq!(block.response.tx_results.len(), txs.len());
    log.push(Logged {
        txs,
        app_hash: block.response.app_hash.to_vec(),
        results: block.response.tx_results.clone(),
    });
    block
}

fn label_of(address: &str) -> &'static str {
    PARTICIPANTS
        .into_iter()
        .find(|label| addr(label) == address)
        .unwrap_or_else(|| panic!("{address} is not a participant"))
}

/// Asserts some event among `events` carries every `(key, value)` of `attrs`.
fn assert_event(events: &[Attributes], kind: &str, attrs: &[(&str, &str)], what: &str) {
    let found = events.iter().any(|event| {
        attrs
            .iter()
            .all(|(key, value)| event.get(*key).map(String::as_str) == Some(*value))
    });
    assert!(
        found,
        "{what}: no {kind} event with {attrs:?}; found {events:?}"
    );
}

/// Asserts tx `index` of `block` succeeded and emitted a `kind` event with `attrs`.
fn assert_tx(block: &Block, index: usize, kind: &str, attrs: &[(&str, &str)]) {
    let result = block.result(index);
    assert_eq!(result.code, 0, "tx {index} ({kind}): {}", result.log);
    let what = format!("tx {index}");
    assert_event(&block.tx_events(index, kind), kind, attrs, &what);
}

/// Asserts the block itself (its hooks, not its txs) emitted a `kind` event with `attrs`.
fn assert_block_event(block: &Block, kind: &str, attrs: &[(&str, &str)]) {
    assert_event(&block.events(kind), kind, attrs, "block hooks");
}

fn validation(w: &World, id: &str) -> pb::Validation {
    w.query::<q::disputes::Validation>(pb::QueryValidationRequest {
        inference_id: id.into(),
    })
    .validation
    .unwrap()
}

fn dispute(w: &World, id: u64) -> pb::Dispute {
    w.query::<q::disputes::Dispute>(pb::QueryDisputeRequest { id })
        .dispute
        .unwrap()
}

/// A record of request `nonce` by `requester` for the TA on n0 (host p0, key seed 10), 100
/// prompt and 50 completion tokens; `honest` records claim the [`truth`], the others a [`lie`].
fn record(requester: &str, nonce: &str, model: &str, honest: bool, commission: u128) -> WorkRecord {
    let mut input = request(
        TA,
        nonce,
        model,
        exec("p0", "n0", 10),
        (100, 50),
        commission,
    );
    if !honest {
        input.response_hash = lie(nonce);
    }
    signed_record(requester, 10, &input)
}

/// `record` as the TA serves it from p0's n0: p0 is paid its tokens at the model's price.
fn served_on_n0(record: WorkRecord) -> Served {
    let price = if record.model == QWEN {
        QWEN_PRICE
    } else {
        LLAMA_PRICE
    };
    Served {
        cost: u128::from(record.prompt_tokens + record.completion_tokens) * price,
        work_per_token: 0,
        host: addr("p0"),
        record,
    }
}

/// A stock `/cosmos.bank.v1beta1.MsgSend`, as a Cosmos wallet builds it.
fn cosmos_send(from: &str, to: &str, amount: u128) -> Any {
    use cosmrs::proto::cosmos::bank::v1beta1::MsgSend;
    use cosmrs::proto::cosmos::base::v1beta1::Coin;
    Any {
        type_url: "/cosmos.bank.v1beta1.MsgSend".into(),
        value: MsgSend {
            from_address: addr(from),
            to_address: addr(to),
            amount: vec![Coin {
                denom: "ngnk".into(),
                amount: amount.to_string(),
            }],
        }
        .encode_to_vec(),
    }
}

/// Runs the scenario on `w`, asserting every tx's result code and key events; returns the
/// blocks it fed.
fn scenario(w: &mut World) -> Log {
    let mut log = Log::new();
    assert_eq!(w.chain.height(), 1);

    // Height 2: registry, both MsgSend flavours, a new participant, a top-up, an unstake;
    // p0, whose n0 will execute the epoch's records, registers the BLS key it co-signs
    // batches with, and alice, bob and carol open escrows for the TA (the committed path
    // charges requesters from them when a batch settles).
    let ta = addr(TA);
    let txs = vec![
        w.tx(TA, vec![register_ta(TA, "https://ta.example")]),
        w.tx(
            "p0",
            vec![msg_register_node(
                &addr("p0"),
                &node_spec("p0", "n0", &[LLAMA], 24_000, 10),
            )],
        ),
        w.tx(
            "p1",
            vec![msg_register_node(
                &addr("p1"),
                &node_spec("p1", "n1", &[LLAMA], 24_000, 11),
            )],
        ),
        w.tx(
            "alice",
            vec![gonka_client::msg_send(
                &addr("alice"),
                &gonka_rewards::validation_pool_address(),
                POOL_FUNDS,
            )],
        ),
        w.tx("bob", vec![cosmos_send("bob", "carol", 777)]),
        w.tx(
            "dave",
            vec![msg_stake(
                &addr("dave"),
                500_000,
                "dave",
                Some(consensus_key(6)),
            )],
        ),
        w.tx("p2", vec![msg_stake(&addr("p2"), 100_000, "", None)]),
        w.tx("p3", vec![msg_unstake(&addr("p3"), UNSTAKED)]),
        w.tx("p0", vec![register_bls("p0")]),
        w.tx(
            "alice",
            vec![msg_open_escrow(&addr("alice"), &ta, ALICE_ESCROW, 500)],
        ),
        w.tx(
            "bob",
            vec![msg_open_escrow(&addr("bob"), &ta, BOB_ESCROW, 500)],
        ),
        w.tx(
            "carol",
            vec![msg_open_escrow(&addr("carol"), &ta, CAROL_ESCROW, 500)],
        ),
    ];
    let b = step(w, &mut log, txs);
    let (p0, p1, p2, p3, dave) = (addr("p0"), addr("p1"), addr("p2"), addr("p3"), addr("dave"));
    let (alice, bob, carol) = (addr("alice"), addr("bob"), addr("carol"));
    assert_tx(&b, 0, "transfer_agent_registered", &[("address", &ta)]);
    assert_tx(
        &b,
        1,
        "node_registered",
        &[("node_id", "n0"), ("host", &p0)],
    );
    assert_tx(
        &b,
        2,
        "node_registered",
        &[("node_id", "n1"), ("host", &p1)],
    );
    let pool = gonka_rewards::validation_pool_address();
    let funded = format!("{POOL_FUNDS}ngnk");
    let to_pool = [("sender", alice.as_str()), ("recipient", &pool)];
    assert_tx(
        &b,
        3,
        "transfer",
        &[to_pool[0], to_pool[1], ("amount", &funded)],
    );
    let to_carol = [("sender", bob.as_str()), ("recipient", &carol)];
    assert_tx(
        &b,
        4,
        "transfer",
        &[to_carol[0], to_carol[1], ("amount", "777ngnk")],
    );
    assert_tx(
        &b,
        5,
        "stake",
        &[("operator", &dave), ("bonded", "500000ngnk")],
    );
    assert_tx(
        &b,
        6,
        "stake",
        &[("operator", &p2), ("bonded", "1100000ngnk")],
    );
    assert_tx(
        &b,
        7,
        "unstake",
        &[("operator", &p3), ("completes_epoch", "1")],
    );
    assert_tx(
        &b,
        8,
        "bls_key_registered",
        &[("address", &p0), ("rotated", "false")],
    );
    for (i, requester, funds) in [
        (9, &alice, ALICE_ESCROW),
        (10, &bob, BOB_ESCROW),
        (11, &carol, CAROL_ESCROW),
    ] {
        let balance = format!("{funds}ngnk");
        assert_tx(
            &b,
            i,
            "escrow_opened",
            &[
                ("requester", requester),
                ("transfer_agent", &ta),
                ("balance", &balance),
                ("release_at", "503"),
            ],
        );
    }

    // Height 3: n0 also serves qwen, n1 leaves. The TA settles batch 1: three records on
    // n0 co-signed by p0, an honest one, a faked one (for a validation dispute) and a faked
    // one bob will dispute; alice's escrow pays 1,505 (1,500 at llama's price and a 5
    // commission) plus 7,500 (qwen's price), bob's 1,500. It also settles batch 2 with a
    // fourth record, which carol signed for another transfer agent (p3), co-signed by p0 too:
    // carol proves that leaf invalid in the same block, which voids batch 2 (her escrow is
    // refunded) and slashes the TA and p0 (whose receipt is on the leaf) 20% each, to her.
    let honest = record("alice", "golden-honest", LLAMA, true, 5);
    let cheat = record("alice", "golden-cheat", QWEN, false, 0);
    let disputed = record("bob", "golden-user", LLAMA, false, 0);
    let foreign = signed_record(
        "carol",
        10,
        &request(
            "p3",
            "golden-foreign",
            LLAMA,
            exec("p0", "n0", 10),
            (1, 1),
            0,
        ),
    );
    let ids: Vec<String> = [&honest, &cheat, &disputed]
        .iter()
        .map(|r| r.inference_id.clone())
        .collect();
    let p0_key = bls_key("p0");
    let batch = SettlementBatch::build(
        &ta,
        1,
        [&honest, &cheat, &disputed]
            .into_iter()
            .map(|r| served_on_n0(r.clone()))
            .collect(),
    )
    .unwrap();
    let foreign_batch = SettlementBatch::build(&ta, 2, vec![served_on_n0(foreign)]).unwrap();
    // What the requesters pay for batch 1: 150 tokens a record at the model's price, plus
    // the honest record's commission of 5.
    let alice_pays = 150 * LLAMA_PRICE + 5 + 150 * QWEN_PRICE;
    let bob_pays = 150 * LLAMA_PRICE;
    assert_eq!((alice_pays, bob_pays), (9_005, 1_500));
    let txs = vec![
        w.tx(
            "p0",
            vec![msg_update_node(
                &addr("p0"),
                &node_spec("p0", "n0", &[QWEN, LLAMA], 96_000, 10),
            )],
        ),
        w.tx("p1", vec![msg_remove_node(&addr("p1"), "n1")]),
        w.tx(
            TA,
            vec![msg_settle_batch(
                &batch.signed(&[cosign(&p0_key, CHAIN_ID, &batch.msg)]),
            )],
        ),
        w.tx(
            TA,
            vec![msg_settle_batch(&foreign_batch.signed(&[cosign(
                &p0_key,
                CHAIN_ID,
                &foreign_batch.msg,
            )]))],
        ),
        w.tx(
            "carol",
            vec![msg_challenge_batch(
                &carol,
                2,
                ChallengeKind::InvalidLeaf(foreign_batch.leaf_proof(0).unwrap()),
            )],
        ),
    ];
    let b = step(w, &mut log, txs);
    let both = format!("{LLAMA},{QWEN}");
    assert_tx(
        &b,
        0,
        "node_updated",
        &[("node_id", "n0"), ("models", &both)],
    );
    assert_tx(&b, 1, "node_removed", &[("node_id", "n1"), ("host", &p1)]);
    assert_tx(
        &b,
        2,
        "batch_settled",
        &[
            ("batch_id", "1"),
            ("records", "3"),
            ("total", "10505ngnk"),
            ("final_at", "6"),
        ],
    );
    assert_tx(
        &b,
        3,
        "batch_settled",
        &[
            ("batch_id", "2"),
            ("records", "1"),
            ("total", "20ngnk"),
            ("final_at", "6"),
        ],
    );
    assert_tx(
        &b,
        4,
        "batch_voided",
        &[
            ("batch_id", "2"),
            ("challenger", &carol),
            ("challenge", "invalid_leaf"),
        ],
    );
    let voided = &b.tx_events(4, "batch_voided")[0];
    let wrong_ta = format!("signed for transfer agent {:?}, not {ta}", addr("p3"));
    assert!(voided["reason"].contains(&wrong_ta), "{voided:?}");
    // Both slashed into the settlement pool, which pays carol a tenth as her bounty (the
    // faulty leaf's host p0 is not paid; no other host is in the batch).
    let settlement_pool = gonka_settlement::pool_address();
    for culprit in [&ta, &p0] {
        assert_tx(
            &b,
            4,
            "slash",
            &[
                ("operator", culprit),
                ("fraction_ppm", "200000"),
                ("beneficiary", &settlement_pool),
            ],
        );
    }
    assert_eq!(voided["slashed"], "400000ngnk", "{voided:?}");
    assert_eq!(voided["bounty"], "40000ngnk", "{voided:?}");
    // Requesters paid from their escrows at settlement; carol's debit came back.
    assert_eq!(w.escrow("alice", TA), ALICE_ESCROW - alice_pays);
    assert_eq!(w.escrow("bob", TA), BOB_ESCROW - bob_pays);
    assert_eq!(w.escrow("carol", TA), CAROL_ESCROW);

    // Height 4: the chain samples every leaf of batch 1 (none of the voided batch 2) and
    // demands them from the TA, which provides them: each becomes a stored work record.
    let provide: Vec<Any> = (0..batch.leaves.len() as u64)
        .map(|i| msg_provide_leaf(&ta, 1, batch.leaf_proof(i).unwrap()))
        .collect();
    let txs = vec![w.tx(TA, provide)];
    let b = step(w, &mut log, txs);
    assert_block_event(
        &b,
        "leaves_sampled",
        &[
            ("batch_id", "1"),
            ("rate_ppm", "1000000"),
            ("count", "3"),
            ("deadline", "5"),
        ],
    );
    assert!(
        b.events("leaves_sampled")
            .iter()
            .all(|e| e["batch_id"] == "1"),
        "a voided batch is not sampled"
    );
    for index in ["0", "1", "2"] {
        assert_tx(
            &b,
            0,
            "leaf_provided",
            &[("batch_id", "1"), ("index", index)],
        );
    }

    // Height 5: x/disputes samples every provided record and assigns each a validator
    // other than the host.
    let b = step(w, &mut log, vec![]);
    for id in &ids {
        assert_block_event(&b, "validation_sampled", &[("inference_id", id)]);
    }
    let validators: Vec<String> = ids.iter().map(|id| validation(w, id).validator).collect();
    assert!(!validators.contains(&p0), "never the executor's host");
    let missing = label_of(&validators[2]);

    // Height 6: batch 1's challenge window closes: p0 is paid its 10,500 and credited its
    // 450 tokens of work, the TA its 5 commission. The validators of the honest and the
    // faked record commit their results, then the TA reveals both outputs: the honest record
    // matches, the faked one mismatches, which opens dispute 0. Nobody answers for the third
    // record.
    let txs = vec![
        w.tx(
            label_of(&validators[0]),
            vec![msg_submit_validation(
                &validators[0],
                &ids[0],
                &found(truth("golden-honest"), (100, 50)),
            )],
        ),
        w.tx(
            label_of(&validators[1]),
            vec![msg_submit_validation(
                &validators[1],
                &ids[1],
                &found(truth("golden-cheat"), (100, 50)),
            )],
        ),
        w.tx(TA, vec![reveal_msg(TA, &honest), reveal_msg(TA, &cheat)]),
    ];
    let b = step(w, &mut log, txs);
    assert_block_event(
        &b,
        "batch_final",
        &[("batch_id", "1"), ("commission", "5ngnk")],
    );
    let settlement_pool = gonka_settlement::pool_address();
    assert_block_event(
        &b,
        "transfer",
        &[
            ("sender", &settlement_pool),
            ("recipient", &p0),
            ("amount", "10500ngnk"),
        ],
    );
    assert_block_event(
        &b,
        "transfer",
        &[
            ("sender", &settlement_pool),
            ("recipient", &ta),
            ("amount", "5ngnk"),
        ],
    );
    assert_block_event(
        &b,
        "work_credited",
        &[("operator", &p0), ("epoch", "0"), ("units", "450")],
    );
    for (i, id) in ids[..2].iter().enumerate() {
        assert_tx(
            &b,
            i,
            "validation_submitted",
            &[("inference_id", id), ("outcome", "committed")],
        );
    }
    assert_tx(
        &b,
        2,
        "validation_submitted",
        &[("inference_id", &ids[0]), ("outcome", "match")],
    );
    assert_tx(
        &b,
        2,
        "validation_submitted",
        &[("inference_id", &ids[1]), ("outcome", "mismatch")],
    );
    assert_tx(
        &b,
        2,
        "dispute_opened",
        &[("dispute_id", "0"), ("kind", "validation")],
    );

    // Height 7: the dispute's committee is drawn from the beacon of height 6.
    let b = step(w, &mut log, vec![]);
    let drawn = b
        .events("dispute_committee")
        .pop()
        .expect("the committee is drawn in the block after the opening");
    let committee = dispute(w, 0).committee;
    assert_eq!(drawn["committee"], committee.join(","));

    // Height 8: two of the three committee members agree with the accuser: p0 is slashed,
    // the faked record's 150 work units are voided and alice refunded its 7,500.
    // The third record's validator missed its deadline and is jailed (until epoch 1, so
    // unjailing now fails); bob disputes his record.
    let mut txs: Vec<Vec<u8>> = committee[..2]
        .iter()
        .map(|member| {
            w.tx(
                label_of(member),
                vec![msg_vote_dispute(
                    member,
                    0,
                    &found(truth("golden-cheat"), (100, 50)),
                )],
            )
        })
        .collect();
    let missing_address = addr(missing);
    txs.push(w.tx(missing, vec![msg_unjail(&missing_address)]));
    txs.push(w.tx("bob", vec![msg_open_dispute(&bob, &ids[2], MIN_DEPOSIT)]));
    let b = step(w, &mut log, txs);
    assert_tx(
        &b,
        0,
        "dispute_vote",
        &[("dispute_id", "0"), ("supports", "accuser")],
    );
    assert_tx(
        &b,
        1,
        "dispute_resolved",
        &[("outcome", "executor_faulted"), ("slashed", &p0)],
    );
    assert_tx(
        &b,
        1,
        "slash",
        &[("operator", &p0), ("fraction_ppm", "200000")],
    );
    assert_tx(
        &b,
        1,
        "work_voided",
        &[("operator", &p0), ("epoch", "0"), ("units", "150")],
    );
    assert_tx(
        &b,
        1,
        "dispute_payout",
        &[
            ("dispute_id", "0"),
            ("to", &alice),
            ("amount", "7500ngnk"),
            ("reason", "refund"),
        ],
    );
    assert_block_event(&b, "validation_missed", &[("inference_id", &ids[2])]);
    let jailed = [("operator", missing_address.as_str()), ("until_epoch", "1")];
    assert_block_event(&b, "jail", &jailed);
    assert_block_event(
        &b,
        "validator_power",
        &[("operator", &missing_address), ("power", "0")],
    );
    let refused = b.result(2);
    assert_eq!(
        (refused.codespace.as_str(), refused.code),
        ("stake", 9),
        "unjail before the jail time: {}",
        refused.log
    );
    assert!(
        refused.log.contains("jailed until epoch 1"),
        "{}",
        refused.log
    );
    assert_tx(
        &b,
        3,
        "dispute_opened",
        &[("dispute_id", "1"), ("kind", "user"), ("accuser", &bob)],
    );

    // Height 9: bob's dispute gets its committee.
    step(w, &mut log, vec![]);

    // Height 10: two members commit their votes before the TA reveals the output the dispute
    // asked for; the reveal decides: the committee sides with bob, p0 is slashed again, the
    // record's work voided and bob refunded its cost and his deposit.
    let committee = dispute(w, 1).committee;
    assert!(!committee.contains(&missing_address), "jailed: no seat");
    let mut txs: Vec<Vec<u8>> = committee[..2]
        .iter()
        .map(|member| {
            w.tx(
                label_of(member),
                vec![msg_vote_dispute(
                    member,
                    1,
                    &found(truth("golden-user"), (100, 50)),
                )],
            )
        })
        .collect();
    txs.push(w.tx(TA, vec![reveal_msg(TA, &disputed)]));
    let b = step(w, &mut log, txs);
    assert_tx(
        &b,
        0,
        "dispute_vote",
        &[("dispute_id", "1"), ("supports", "pending_reveal")],
    );
    assert_tx(
        &b,
        2,
        "dispute_resolved",
        &[("dispute_id", "1"), ("outcome", "executor_faulted")],
    );
    assert_tx(
        &b,
        2,
        "work_voided",
        &[("operator", &p0), ("epoch", "0"), ("units", "150")],
    );
    assert_tx(
        &b,
        2,
        "dispute_payout",
        &[("to", &bob), ("amount", "1500ngnk"), ("reason", "refund")],
    );
    assert_tx(
        &b,
        2,
        "dispute_payout",
        &[("to", &bob), ("reason", "deposit_return")],
    );

    // Height 11: epoch 0 ends. Rewards settle (p0's honest record is the only work left
    // credited), dave enters the validator set, the jailed validator stays out. Key
    // generation round 1 starts with p0 alone (the only validator with a BLS key); p0 never
    // deals, so it fails at 15 (and p0, sitting it out, earns no validation rewards in
    // epoch 1).
    let b = step(w, &mut log, vec![]);
    assert_eq!((w.chain.height(), b.closed_epoch), (EPOCH_LENGTH, Some(0)));
    assert_block_event(
        &b,
        "rewards_settled",
        &[("epoch", "0"), ("total_work", "150")],
    );
    assert_block_event(&b, "reward", &[("operator", &p0), ("work", "150")]);
    assert_block_event(&b, "validator_power", &[("operator", &dave)]);
    assert_block_event(&b, "epoch_ended", &[("epoch", "0"), ("end_height", "11")]);
    assert_block_event(&b, "dkg_started", &[("round", "1"), ("members", "1")]);
    assert!(w.participant("dave").power > 0);
    assert_eq!(w.participant(missing).power, 0);

    // Height 12: the jail time is over; p1 and p2 register BLS keys.
    let bls_keys = [11u8, 12].map(|n| gonka_bls_crypto::SecretKey::from_seed(&[n; 32]));
    let txs = vec![
        w.tx(missing, vec![msg_unjail(&missing_address)]),
        w.tx(
            "p1",
            vec![gonka_client::bls::msg_register_bls_key(
                &p1,
                CHAIN_ID,
                &bls_keys[0],
            )],
        ),
        w.tx(
            "p2",
            vec![gonka_client::bls::msg_register_bls_key(
                &p2,
                CHAIN_ID,
                &bls_keys[1],
            )],
        ),
    ];
    let b = step(w, &mut log, txs);
    for (i, address) in [(1, &p1), (2, &p2)] {
        assert_tx(
            &b,
            i,
            "bls_key_registered",
            &[("address", address), ("rotated", "false")],
        );
    }
    assert_block_event(
        &b,
        "epoch_started",
        &[("epoch", "1"), ("start_height", "12")],
    );
    assert_tx(&b, 0, "unjail", &[("operator", &missing_address)]);

    // Height 13: alice tops her escrow up (what batch 1 left of it, plus 1,000, and a
    // later expiry); bob closes his (released at 16).
    let txs = vec![
        w.tx("alice", vec![msg_top_up_escrow(&alice, &ta, 1_000, 600)]),
        w.tx("bob", vec![msg_close_escrow(&bob, &ta)]),
    ];
    let b = step(w, &mut log, txs);
    let topped_up = format!("{}ngnk", ALICE_ESCROW - alice_pays + 1_000);
    assert_tx(
        &b,
        0,
        "escrow_topped_up",
        &[("balance", &topped_up), ("release_at", "603")],
    );
    assert_tx(&b, 1, "escrow_closing", &[("release_at", "16")]);

    // Height 14: the TA settles batch 3 (its third) of two records executed on p1's n1,
    // co-signed by p1's BLS key; it becomes final at 17. Carol demands leaf 0 on chain with
    // a deposit.
    let served = |requester: &str, nonce: &str| Served {
        record: signed_record(
            requester,
            11,
            &request(TA, nonce, LLAMA, exec("p1", "n1", 11), (30, 20), 5),
        ),
        host: p1.clone(),
        cost: 500,
        work_per_token: 0,
    };
    let settled =
        SettlementBatch::build(&ta, 3, vec![served("alice", "s1"), served("bob", "s2")]).unwrap();
    let signature = cosign(&bls_keys[0], CHAIN_ID, &settled.msg);
    let txs = vec![
        w.tx(TA, vec![msg_settle_batch(&settled.signed(&[signature]))]),
        w.tx("carol", vec![msg_demand_leaf(&carol, 3, 0, 1_000_000)]),
    ];
    let b = step(w, &mut log, txs);
    assert_tx(
        &b,
        1,
        "leaf_demanded",
        &[("batch_id", "3"), ("index", "0"), ("deadline", "15")],
    );
    assert_tx(
        &b,
        0,
        "batch_settled",
        &[
            ("batch_id", "3"),
            ("records", "2"),
            ("total", "1010ngnk"),
            ("final_at", "17"),
        ],
    );

    // Height 15: the chain samples the batch's other leaf (leaf 0 is demanded already) and
    // demands it from the TA; carol challenges an honest leaf and loses (code 14, nothing
    // changes); the TA provides both leaves, which become work records to validate. Key
    // generation round 1 fails: its only member never dealt.
    let txs = vec![
        w.tx(
            "carol",
            vec![msg_challenge_batch(
                &carol,
                3,
                ChallengeKind::InvalidLeaf(settled.leaf_proof(1).unwrap()),
            )],
        ),
        w.tx(
            TA,
            vec![
                msg_provide_leaf(&ta, 3, settled.leaf_proof(0).unwrap()),
                msg_provide_leaf(&ta, 3, settled.leaf_proof(1).unwrap()),
            ],
        ),
    ];
    let b = step(w, &mut log, txs);
    assert_block_event(
        &b,
        "leaves_sampled",
        &[("batch_id", "3"), ("count", "2"), ("deadline", "16")],
    );
    assert_eq!(
        (b.result(0).codespace.as_str(), b.result(0).code),
        ("settlement", 14),
        "{}",
        b.result(0).log
    );
    for index in ["0", "1"] {
        assert_tx(
            &b,
            1,
            "leaf_provided",
            &[("batch_id", "3"), ("index", index)],
        );
    }
    assert_block_event(
        &b,
        "dkg_failed",
        &[("round", "1"), ("reason", "no dealer qualified")],
    );

    // Height 16: bob's escrow is released (what batches 1 and 3 left of it); both provided
    // records are sampled for re-execution (at the executors' rate over the leaves' sampling
    // chance: here 100%).
    let b = step(w, &mut log, vec![]);
    let released = format!("{}ngnk", BOB_ESCROW - bob_pays - 505);
    assert_block_event(
        &b,
        "escrow_released",
        &[("requester", &bob), ("balance", &released)],
    );
    let sampled = b.events("validation_sampled");
    assert_eq!(sampled.len(), 2, "{sampled:?}");

    // Height 17: each assigned validator commits the right answer and the TA reveals both
    // outputs: two matches. Batch 3 pays p1 and the TA.
    let mut txs = Vec::new();
    let mut reveals = Vec::new();
    for leaf in &settled.leaves {
        let record = leaf.record.clone().unwrap();
        let validator = sampled
            .iter()
            .find(|e| e["inference_id"] == record.inference_id)
            .map(|e| e["validator"].clone())
            .unwrap();
        txs.push(w.tx(
            label_of(&validator),
            vec![msg_submit_validation(
                &validator,
                &record.inference_id,
                &found(truth(&record.nonce), (30, 20)),
            )],
        ));
        reveals.push(reveal_msg(TA, &record));
    }
    txs.push(w.tx(TA, reveals));
    let b = step(w, &mut log, txs);
    for leaf in &settled.leaves {
        let id = &leaf.record.as_ref().unwrap().inference_id;
        assert_tx(
            &b,
            2,
            "validation_submitted",
            &[("inference_id", id), ("outcome", "match")],
        );
    }
    assert_block_event(
        &b,
        "batch_final",
        &[("batch_id", "3"), ("commission", "10ngnk")],
    );

    // Heights 18 to 22: epoch 1 ends; p3's unbonding is paid and the unjailed validator
    // gets power again.
    let b = loop {
        let b = step(w, &mut log, vec![]);
        if b.closed_epoch.is_some() {
            break b;
        }
    };
    assert_eq!(
        (w.chain.height(), b.closed_epoch),
        (2 * EPOCH_LENGTH, Some(1))
    );
    let unstaked = format!("{UNSTAKED}ngnk");
    assert_block_event(
        &b,
        "unbonding_completed",
        &[("operator", &p3), ("amount", &unstaked)],
    );
    assert_block_event(&b, "validator_power", &[("operator", &missing_address)]);
    assert_block_event(&b, "rewards_settled", &[("epoch", "1")]);
    assert!(w.participant(missing).power > 0);
    // The same block starts key generation round 2 among the validators with BLS keys:
    // p0, p1 and p2.
    assert_block_event(&b, "dkg_started", &[("round", "2"), ("members", "3")]);
    let round = w
        .query::<q::bls::Dkg>(gonka_proto::bls::QueryDkgRequest { round: 2 })
        .round
        .unwrap();
    let members: Vec<&str> = round.members.iter().map(|m| m.address.as_str()).collect();
    let mut expected = vec![p0.as_str(), p1.as_str(), p2.as_str()];
    expected.sort_unstable();
    assert_eq!(members, expected);

    // Height 23: p1 deals. Height 24: p2 complains about it. Height 25: p1's reveal shows
    // its shares to p2 are valid, so p2 is disqualified. Height 26: the round is final.
    let poly = gonka_bls_crypto::threshold::Polynomial::from_seed(
        round.threshold as usize,
        b"golden dealer",
    );
    let txs = vec![w.tx("p1", vec![dkg_dealing(&round, &p1, &poly, None)])];
    let b = step(w, &mut log, txs);
    assert_tx(&b, 0, "dkg_dealt", &[("round", "2"), ("dealer", &p1)]);
    let txs = vec![w.tx("p2", vec![dkg_complaint(2, "p2", "p1")])];
    let b = step(w, &mut log, txs);
    assert_tx(
        &b,
        0,
        "dkg_complaint",
        &[("dealer", &p1), ("complainer", &p2)],
    );
    let txs = vec![w.tx(
        "p1",
        vec![dkg_reveal(2, "p1", "p2", &bls_keys[1].public_key())],
    )];
    let b = step(w, &mut log, txs);
    assert_tx(&b, 0, "dkg_reveal", &[("outcome", "valid_shares")]);
    let b = step(w, &mut log, vec![]);
    let done = w
        .query::<q::bls::Dkg>(gonka_proto::bls::QueryDkgRequest { round: 2 })
        .round
        .unwrap();
    assert!(done
        .members
        .iter()
        .any(|m| m.address == p2 && m.disqualified));
    // p0 never deals, but is not disqualified: with p1 it holds the threshold's slots, so
    // the round completes with p1 the only qualified dealer.
    assert_eq!(
        (done.status.as_str(), done.qualified_dealers.clone()),
        ("completed", vec![p1.clone()])
    );
    assert_block_event(
        &b,
        "dkg_completed",
        &[("round", "2"), ("qualified_dealers", "1")],
    );
    training(w, &mut log);
    log
}

/// Heights 27 to 34: a training job of two workers and one round, every checkpoint sampled.
/// p3 trains honestly and its verifier agrees; p4 submits stale weights, its verifier
/// disagrees, and the committee faults it: p4 is slashed to the accuser and the members
/// who voted.
fn training(w: &mut World, log: &mut Log) {
    use k256::sha2::Digest;
    let hash = |text: &str| -> [u8; 32] { k256::sha2::Sha256::digest(text.as_bytes()).into() };
    let hashes = |weights: &str| CheckpointHashes {
        start_weights: hash("initial weights"),
        weights: hash(weights),
        optimizer_state: hash(&format!("adamw of {weights}")),
        data_indices: hash(&format!("indices of {weights}")),
        pseudo_gradient: hash(&format!("delta of {weights}")),
    };
    let re_executed = |weights: &str| ReExecuted::Hashes {
        weights: hash(weights),
        optimizer_state: hash(&format!("adamw of {weights}")),
    };
    let job = polpb::MsgCreateTrainingJob {
        creator: addr("alice"),
        config: Some(training_config()),
        dataset_root: hash("golden corpus").to_vec(),
        seed: 7,
        outer_rounds: 1,
        worker_count: 2,
        round_blocks: 3,
        reward_budget: "10000".into(),
    };
    let txs = vec![w.tx("alice", vec![gonka_client::tx::any_of(&job)])];
    let b = step(w, log, txs);
    assert_tx(&b, 0, "training_job_created", &[("job_id", "1")]);
    let txs = ["p3", "p4"]
        .iter()
        .map(|host| {
            w.tx(
                host,
                vec![msg_join_training(
                    &addr(host),
                    1,
                    &format!("http://{host}.example:9400"),
                )],
            )
        })
        .collect();
    let b = step(w, log, txs);
    assert_tx(
        &b,
        1,
        "training_round_opened",
        &[("job_id", "1"), ("round", "1")],
    );
    let txs = vec![
        w.tx(
            "p3",
            vec![msg_submit_checkpoint(
                &addr("p3"),
                1,
                1,
                &hashes("p3 trained"),
                2_000_000,
            )],
        ),
        w.tx(
            "p4",
            vec![msg_submit_checkpoint(
                &addr("p4"),
                1,
                1,
                &hashes("stale"),
                2_000_000,
            )],
        ),
    ];
    let b = step(w, log, txs);
    assert_block_event(&b, "training_job_completed", &[("job_id", "1")]);
    let b = step(w, log, vec![]);
    assert_block_event(&b, "checkpoint_sampled", &[("worker", &addr("p4"))]);
    let checkpoint = |w: &World, worker: &str| {
        w.query::<q::pol::Checkpoints>(polpb::QueryCheckpointsRequest {
            job_id: 1,
            round: 1,
            pagination: None,
        })
        .checkpoints
        .into_iter()
        .find(|c| c.worker == addr(worker))
        .unwrap()
    };
    let verifier3 = label_of(&checkpoint(w, "p3").verifier);
    let verifier4 = label_of(&checkpoint(w, "p4").verifier);
    let txs = vec![
        w.tx(
            verifier3,
            vec![msg_verify_checkpoint(
                &addr(verifier3),
                1,
                1,
                &addr("p3"),
                re_executed("p3 trained"),
            )],
        ),
        w.tx(
            verifier4,
            vec![msg_verify_checkpoint(
                &addr(verifier4),
                1,
                1,
                &addr("p4"),
                re_executed("p4 trained"),
            )],
        ),
    ];
    let b = step(w, log, txs);
    assert_tx(&b, 0, "checkpoint_verified", &[("worker", &addr("p3"))]);
    assert_tx(&b, 1, "checkpoint_disputed", &[("worker", &addr("p4"))]);
    let b = step(w, log, vec![]);
    assert_block_event(&b, "checkpoint_committee", &[("worker", &addr("p4"))]);
    let committee = checkpoint(w, "p4").committee;
    let txs = committee[..2]
        .iter()
        .map(|member| {
            let label = label_of(member);
            w.tx(
                label,
                vec![msg_verify_checkpoint(
                    member,
                    1,
                    1,
                    &addr("p4"),
                    re_executed("p4 trained"),
                )],
            )
        })
        .collect();
    let b = step(w, log, txs);
    assert_tx(
        &b,
        1,
        "checkpoint_decided",
        &[
            ("worker", &addr("p4")),
            ("status", "CHECKPOINT_STATUS_FAULTED"),
        ],
    );
    assert_tx(&b, 1, "slash", &[("operator", &addr("p4"))]);
    assert_tx(&b, 1, "budget_returned", &[("job_id", "1")]);
    // p3, the one worker left, attests the final weights: a majority of one publishes them.
    let txs = vec![w.tx(
        "p3",
        vec![msg_publish_model(&addr("p3"), 1, &hash("final weights"))],
    )];
    let b = step(w, log, txs);
    assert_tx(&b, 0, "model_published", &[("model_id", "pol/job-1")]);
}

/// Runs the scenario on a fresh chain, replays the same blocks on a second fresh chain
/// (which must agree at every height, results included), and compares the final app hash
/// with [`GOLDEN`].
///
/// Genesis: participants p0..p5 (bond 1,000,000 ngnk each, consensus keys
/// `support::consensus_key(0..6)`; dave stakes with key 6), alice, bob, carol and dave funded, every key derived
/// from its label's fixed well-known mnemonic and ML node keys from fixed scalars; block
/// times and hashes come from the harness (fixed per height), so nothing varies between
/// runs. Every tx's result code and key events are asserted before the hash is compared, so
/// a scenario whose txs fail cannot pass.
///
/// Message kinds covered (every decoder in `x/*/src/msgs/mod.rs`; auth, epochs and rewards
/// have no messages):
/// - bank: `/gonka.bank.v1.MsgSend` (to the validation pool) and the stock
///   `/cosmos.bank.v1beta1.MsgSend`;
/// - stake: `MsgStake` (creating participant dave with a consensus key, and a top-up),
///   `MsgUnstake`, `MsgUnjail` (refused with code 9 while jailed, accepted once the jail
///   time is over);
/// - inference: `MsgRegisterTransferAgent`, `MsgRegisterNode`, `MsgUpdateNode`,
///   `MsgRemoveNode`;
/// - bls: `MsgRegisterBlsKey` (three participants' keys with their proofs of possession:
///   p0's before it co-signs the first batches, p1's and p2's in epoch 1), `MsgDkgDeal`,
///   `MsgDkgComplain` (a false complaint) and `MsgDkgReveal` (which clears the dealer and
///   disqualifies the complainer) in the key generation round that the end of epoch 1
///   starts, which completes with that dealer alone;
/// - disputes: `MsgSubmitValidation` (committed results: of two records of the first
///   batch, and of both records of the last), `MsgRevealOutput` (judging them: matches and a
///   mismatch, which opens a validation dispute; and the output a user dispute asked for,
///   revealed after two committed votes), `MsgOpenDispute` (a user dispute), `MsgVoteDispute`
///   (both disputes decided against the executor: slashed, the record's work voided, the
///   requester refunded);
/// - settlement: `MsgOpenEscrow` (three requesters, before the first batch),
///   `MsgTopUpEscrow`, `MsgCloseEscrow` (released three blocks later), `MsgSettleBatch`
///   (three batches: three records with requester and executor signatures co-signed by
///   their host, on which the validation and the user dispute above run, paid out three
///   blocks later; one record signed for another transfer agent; two records of another
///   host), `MsgChallengeBatch` (an `invalid_leaf` proving the foreign record, which voids
///   its batch, refunds the requester and slashes the TA and the co-signing host to the
///   challenger; and one of an honest leaf, which fails), `MsgDemandLeaf` and
///   `MsgProvideLeaf` (every leaf of the first batch sampled by the chain and provided, each
///   becoming a work record; in the last batch a demanded leaf, whose deposit goes to the
///   TA, and the leaf the chain sampled, both provided and validated: two matches);
/// - pol: `MsgCreateTrainingJob`, `MsgJoinTraining` (two hosts, the second starting the
///   job), `MsgSubmitCheckpoint` (an honest one and stale weights), `MsgVerifyCheckpoint`
///   (a verifier agreeing, one disagreeing, and two committee votes that fault the stale
///   checkpoint), `MsgPublishModel` (the remaining worker's attestation publishing the
///   trained model).
///
/// Hooks covered: settlement `begin_block` (leaves sampled and demanded, batches final:
/// hosts and the TA paid, work credited; an escrow released); disputes `begin_block`
/// (sampling, a missed validation that jails) and `end_block`; stake `end_block` (the jailed
/// validator leaves the set) and `end_epoch` (unbonding paid, powers from work); rewards
/// `end_epoch` (emission, fees, validation share, rewards by work); bls `end_epoch` (a key
/// generation round started at each epoch end) and `begin_block` (round 1, whose only
/// member never dealt, failed; round 2 completed); epochs `begin_block` and the epoch
/// advance, at heights 11 and 22; pol `end_block` (a round closed early, completing its
/// job) and `begin_block` (checkpoints sampled and assigned, a committee drawn).
///
/// Updating the hash: a mismatch means the state layout, encoding or execution changed.
/// If that is intended, copy the new value from the failure message into [`GOLDEN`] in the
/// same commit as the change and say in its message why the hash moved.
#[test]
fn golden_app_hash_over_every_message_kind() {
    let mut a = world();
    let log = scenario(&mut a);

    let mut b = world();
    for logged in &log {
        let height = b.chain.height() + 1;
        let block = b.block(logged.txs.clone());
        assert_eq!(
            block.response.tx_results, logged.results,
            "a second instance's results differ at height {height}"
        );
        assert_eq!(
            block.response.app_hash.to_vec(),
            logged.app_hash,
            "a second instance's app hash differs at height {height}"
        );
    }
    assert_eq!(a.chain.app_hash(), b.chain.app_hash());

    let got = hex::encode(a.chain.app_hash());
    assert_eq!(
        got, GOLDEN,
        "the golden app hash moved: if the change is intended, set GOLDEN to \"{got}\""
    );
}
