//! x/disputes through the ABCI harness with ordinary signed txs: sampling of work records
//! (the rate rule, its adaptive decay, reproducibility), validations that match, cheating
//! executors and false accusers slashed 20% with the slash landing on the honest side, user
//! disputes won and lost, missed deadlines (reputation, then jail), and every bad input
//! refused with its own code and no state change.
//!
//! Work reaches x/disputes through committed batches of x/settlement: the transfer agent
//! settles a batch (alice pays from her escrow), the chain demands its sampled leaves (with
//! the scenario's rate of 100%, all of them) and each provided leaf becomes the work record
//! that is sampled, validated and disputed; the host is paid and its work credited only when
//! the batch becomes final, a challenge window later.
//!
//! Every block goes through `World::block`, which checks after each block that bank
//! balances sum to the supply, that the supply does not change outside epoch ends (so
//! slashes, refunds and rewards only move money) and stake's invariants (the pools equal
//! the bonds and unbonding entries, also after a slash).

mod common;
mod support;

use gonka_proto::query as q;
use std::collections::{BTreeMap, BTreeSet};

use gonka_client::disputes::{
    msg_open_dispute, msg_reveal_output, msg_reveal_scored_output, msg_submit_validation,
    msg_vote_dispute, ReExecution,
};
use gonka_client::settlement::{
    cosign, msg_dispute_leaf, msg_open_escrow, msg_provide_leaf, msg_settle_batch, Batch, Served,
};
use gonka_client::tx::{msg_register_node, NodeSpec};
use gonka_proto::disputes as pb;
use gonka_proto::inference::WorkRecord;
use gonka_proto::settlement as spb;
use gonka_sdk::Any;
use k256::sha2::{Digest, Sha256};
use serde_json::json;
use support::*;
use tendermint_proto::v0_38::abci::ExecTxResult;

const MODEL: &str = "meta/llama-8b";
const PRICE: u128 = 10;
/// The transfer agent (also a validator, never assigned its own records).
const TA: &str = "p5";
/// Bond of every participant.
const BOND: u128 = 1_000_000;
/// Tokens of a scenario record (100 prompt + 50 completion) and its cost.
const TOKENS: u64 = 150;
const COST: u128 = 150 * PRICE;
/// What alice puts into the validation pool at the start.
const POOL_FUNDS: u128 = 1_000_000;
const MIN_DEPOSIT: u128 = 10_000;
/// 20% of one bond.
const SLASH: u128 = BOND / 5;
const LABELS: [&str; 8] = ["p0", "p1", "p2", "p3", "p4", "p5", "alice", "bob"];
/// Blocks a committed batch stays open to challenges before it pays its hosts and credits
/// their work: longer than any test's validations and disputes, so a batch becomes final only
/// when a test waits for it ([`until_batches_final`]).
const WINDOW: u64 = 50;
/// What alice escrows for a transfer agent at the start (its batches are paid from it), and
/// the height her escrow expires at (never, in these tests).
const ESCROW: u128 = 1_000_000;
const ESCROW_EXPIRY: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------
// Fixture

/// Scenario parameters: every record sampled, short deadlines, committees of 3, 20% slash.
fn scenario_params() -> pb::Params {
    pb::Params {
        min_sample_ppm: 1_000_000,
        max_sample_ppm: 1_000_000,
        decay_validations: 20,
        validation_deadline_blocks: 4,
        dispute_deadline_blocks: 20,
        committee_size: 3,
        slash_fraction_ppm: 200_000,
        min_deposit: MIN_DEPOSIT.to_string(),
        validation_reward_ppm: 1_000_000,
        jail_after_misses: 100,
        miss_penalty_ppm: 100_000,
        dispute_window_blocks: 100,
        reveal_deadline_blocks: 3,
    }
}

/// Scenario parameters with nothing sampled (for user disputes).
fn unsampled_params() -> pb::Params {
    pb::Params {
        min_sample_ppm: 0,
        max_sample_ppm: 0,
        ..scenario_params()
    }
}

/// Six participants p0..p5 bonding `BOND` each (equal power); 1,000-block epochs, so no
/// epoch ends and rewards never move balances; node n0 of host p0, whose BLS key is
/// registered (a host co-signs the batches that pay it); TA p5, so the validators and
/// committee members of its records are p1..p4; the validation pool funded with `POOL_FUNDS`
/// by alice, who escrows `ESCROW` for the TA; committed batches final after `WINDOW` blocks,
/// every leaf a host's rate asks for demanded (so at the scenario's rate of 100% every
/// committed record becomes a stored work record).
fn world(params: pb::Params) -> World {
    world_of(
        params,
        json!({"id": MODEL, "price_per_token": PRICE.to_string(), "min_vram_mib": 0}),
    )
}

/// [`world`] with `model` (genesis JSON) as its one model, whose id must be `MODEL`.
fn world_of(params: pb::Params, model: serde_json::Value) -> World {
    let mut setup = Setup::new(6, BOND);
    setup.epoch_length = 1_000;
    let mut world = World::with_genesis(setup, |state| {
        state["inference"] = json!({
            "params": {"max_tokens_per_record": 100000, "payload_retention_blocks": 2000},
            "models": [model],
        });
        state["disputes"] = json!({ "params": params });
        let settlement = &mut state["settlement"]["params"];
        settlement["challenge_window_blocks"] = WINDOW.into();
        settlement["leaf_answer_blocks"] = 5.into();
        settlement["leaf_sample_ppm"] = 1_000_000.into();
        // The test requests are signed at a fixed time long before the harness's blocks.
        settlement["max_record_age_secs"] = 100_000_000.into();
        settlement["batch_keep_secs"] = 200_000_000.into();
    });
    let txs = vec![
        world.tx(TA, vec![register_ta(TA, "https://ta.example")]),
        world.tx(
            "p0",
            vec![msg_register_node(&addr("p0"), &spec(0)), register_bls("p0")],
        ),
        world.tx(
            "alice",
            vec![gonka_client::msg_send(
                &addr("alice"),
                &gonka_rewards::validation_pool_address(),
                POOL_FUNDS,
            )],
        ),
        world.tx(
            "alice",
            vec![msg_open_escrow(
                &addr("alice"),
                &addr(TA),
                ESCROW,
                ESCROW_EXPIRY,
            )],
        ),
    ];
    let block = world.block(txs);
    for i in 0..4 {
        assert_eq!(block.result(i).code, 0, "{}", block.result(i).log);
    }
    world
}

/// ML node `n{index}` of host `p{index}` serving the model, with key seed `10 + index`.
fn spec(index: u8) -> NodeSpec {
    node_spec(
        &format!("p{index}"),
        &format!("n{index}"),
        &[MODEL],
        24_000,
        10 + index,
    )
}

/// A record by alice for the TA executed on node `n{node}` of host `p{node}` with `tokens`;
/// `honest` records claim the truth, the others a [`lie`].
fn record_on(node: u8, nonce: &str, honest: bool, tokens: (u64, u64)) -> WorkRecord {
    let (host, id) = (format!("p{node}"), format!("n{node}"));
    let on = exec(&host, &id, 10 + node);
    let mut input = request(TA, nonce, MODEL, on, tokens, 0);
    if !honest {
        input.response_hash = lie(nonce);
    }
    signed_record("alice", 10 + node, &input)
}

/// A scenario record of `TOKENS` tokens on n0 (host p0).
fn record(nonce: &str, honest: bool) -> WorkRecord {
    record_on(0, nonce, honest, (100, 50))
}

/// A re-execution of a scenario record that found answer `result_hash` and the record's true
/// token counts.
fn answer(result_hash: [u8; 32]) -> ReExecution {
    found(result_hash, (100, 50))
}

/// The host (label) of a record: `p{i}` for node `n{i}`.
fn host_of(record: &WorkRecord) -> &'static str {
    match record.executor_node.as_str() {
        "n0" => "p0",
        "n1" => "p1",
        node => panic!("no test host runs node {node}"),
    }
}

/// Settles `records` as the TA's next committed batch ([`commit_batch`]: the block that
/// settles it and debits alice's escrow, the block that demands its sampled leaves — at the
/// scenario's rate of 100%, all of them — and the block in which the TA provides them, each
/// becoming a stored work record), then commits the next (empty) block, in which x/disputes
/// samples the stored records. Returns that sampling block.
fn settle(world: &mut World, records: &[WorkRecord]) -> Block {
    commit_batch(world, TA, records, host_of);
    world.block(vec![])
}

/// The open leaf demands on the TA's batches, as `(batch id, leaf index)`.
fn demands(world: &World) -> Vec<(u64, u64)> {
    world
        .query::<q::settlement::Demands>(spb::QueryDemandsRequest {
            transfer_agent: addr(TA),
            ..Default::default()
        })
        .demands
        .into_iter()
        .map(|d| (d.batch_id, d.index))
        .collect()
}

/// Settles `rec` as the TA's next committed batch when nothing is sampled (the unsampled
/// parameters give every host a rate of 0, so the chain demands no leaf and no record is
/// stored): returns the batch and its id.
fn settle_unsampled(world: &mut World, rec: &WorkRecord) -> (Batch, u64) {
    let settled = commit_batch(world, TA, std::slice::from_ref(rec), host_of);
    assert!(
        demands(world).is_empty(),
        "the chain samples no leaf at rate 0"
    );
    settled
}

/// alice disputes `rec`, settled unsampled, the way a requester disputes any answer it got:
/// with its leaf and proof as the TA serves them (MsgDisputeLeaf), which stores the record
/// unsampled and opens the dispute with `deposit`. Returns that block.
fn dispute_unsampled(world: &mut World, rec: &WorkRecord, deposit: u128) -> Block {
    let (batch, id) = settle_unsampled(world, rec);
    let proof = batch.leaf_proof(0).unwrap();
    let tx = world.tx(
        "alice",
        vec![msg_dispute_leaf(&addr("alice"), id, proof, deposit)],
    );
    let block = world.block(vec![tx]);
    assert_ok(&block, 0);
    block
}

fn label_of(address: &str) -> &'static str {
    LABELS
        .into_iter()
        .find(|label| addr(label) == address)
        .unwrap_or_else(|| panic!("{address} is not a test account"))
}

fn validation(world: &World, id: &str) -> pb::Validation {
    world
        .query::<q::disputes::Validation>(pb::QueryValidationRequest {
            inference_id: id.into(),
        })
        .validation
        .unwrap()
}

fn dispute(world: &World, id: u64) -> pb::Dispute {
    world
        .query::<q::disputes::Dispute>(pb::QueryDisputeRequest { id })
        .dispute
        .unwrap()
}

/// Dispute `id` with its committee, drawn in the block after the one that opened it: commits
/// an empty block first if it has none yet.
fn drawn(world: &mut World, id: u64) -> pb::Dispute {
    if dispute(world, id).committee.is_empty() {
        world.block(Vec::new());
    }
    let d = dispute(world, id);
    assert!(!d.committee.is_empty(), "dispute {id} has no committee");
    d
}

fn stats(world: &World, label: &str) -> pb::QueryStatsResponse {
    world.query::<q::disputes::Stats>(pb::QueryStatsRequest {
        address: addr(label),
    })
}

fn pending(world: &World, address: &str) -> Vec<pb::PendingWork> {
    world
        .query::<q::disputes::Pending>(pb::QueryPendingRequest {
            validator: address.into(),
            ..Default::default()
        })
        .work
}

fn balances(world: &World) -> BTreeMap<&'static str, u128> {
    LABELS
        .into_iter()
        .map(|label| (label, world.balance_of(label)))
        .collect()
}

fn pool(world: &World) -> u128 {
    world.balance(&gonka_rewards::validation_pool_address())
}

fn community(world: &World) -> u128 {
    world.balance(&gonka_rewards::community_pool_address())
}

fn escrow(world: &World) -> u128 {
    world.balance(&gonka_disputes::escrow_address())
}

fn assert_ok(block: &Block, index: usize) {
    let result = block.result(index);
    assert_eq!(result.code, 0, "tx {index}: {}", result.log);
}

fn assert_err(result: &ExecTxResult, code: u32, fragment: &str, what: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("disputes", code),
        "{what}: {}",
        result.log
    );
    assert!(
        result.log.contains(fragment),
        "{what}: {:?} lacks {fragment:?}",
        result.log
    );
}

fn payouts(d: &pb::Dispute) -> Vec<(String, u128, String)> {
    d.payouts
        .iter()
        .map(|p| (p.to.clone(), p.amount.parse().unwrap(), p.reason.clone()))
        .collect()
}

fn work_of(world: &World, label: &str) -> u64 {
    world
        .work(0)
        .into_iter()
        .find(|(operator, _)| *operator == addr(label))
        .map(|(_, units)| units)
        .unwrap_or(0)
}

/// The TA reveals `rec`'s output in the next block, which it returns.
fn reveal(world: &mut World, rec: &WorkRecord) -> Block {
    let tx = world.tx(TA, vec![reveal_msg(TA, rec)]);
    let block = world.block(vec![tx]);
    assert_ok(&block, 0);
    assert_eq!(
        tx_events(block.result(0), "output_revealed")[0]["inference_id"],
        rec.inference_id
    );
    block
}

/// Settles a record, has its assigned validator commit `result` and the TA reveal the
/// output; returns the record id, the validator's label and the revealing block (where the
/// validation is judged).
fn validate(
    world: &mut World,
    rec: WorkRecord,
    result: &ReExecution,
) -> (String, &'static str, Block) {
    let id = rec.inference_id.clone();
    let sampling = settle(world, std::slice::from_ref(&rec));
    let sampled = sampling.events("validation_sampled");
    assert_eq!(sampled.len(), 1);
    assert_eq!(sampled[0]["inference_id"], id);
    let v = validation(world, &id);
    assert_ne!(v.validator, addr("p0"), "never the executor's own host");
    let label = label_of(&v.validator);
    let tx = world.tx(
        label,
        vec![msg_submit_validation(&v.validator, &id, result)],
    );
    let block = world.block(vec![tx]);
    assert_ok(&block, 0);
    let committed = &tx_events(block.result(0), "validation_submitted")[0];
    assert_eq!(committed["outcome"], "committed");
    assert_eq!(validation(world, &id).status, "committed");
    let block = reveal(world, &rec);
    (id, label, block)
}

// ---------------------------------------------------------------------------------------
// Validations and disputes

#[test]
fn records_go_to_validators_serving_their_model_when_any_does() {
    let mut w = world(scenario_params());
    // p2 now runs an ML node serving the model; p1, p3 and p4 serve nothing.
    let tx = w.tx("p2", vec![msg_register_node(&addr("p2"), &spec(2))]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    let records: Vec<WorkRecord> = (0..6)
        .map(|i| record(&format!("served-{i}"), true))
        .collect();
    settle(&mut w, &records);
    for rec in &records {
        // Not p0 (the executor) nor p5 (the TA): p2 is the one validator serving the model.
        assert_eq!(
            validation(&w, &rec.inference_id).validator,
            addr("p2"),
            "{}",
            rec.inference_id
        );
    }
}

#[test]
fn honest_executor_validation_matches_and_both_are_paid() {
    let mut w = world(scenario_params());
    let rec = record("honest", true);
    let id = rec.inference_id.clone();
    let (p0_before, alice_before) = (w.balance_of("p0"), w.balance_of("alice"));
    let sampling = settle(&mut w, std::slice::from_ref(&rec));
    assert_eq!(
        w.escrow("alice", TA),
        ESCROW - COST,
        "the requester pays from her escrow when the batch lands"
    );
    assert_eq!(w.balance_of("alice"), alice_before);
    assert_eq!(
        w.balance_of("p0"),
        p0_before,
        "the executor is paid only when the batch is final"
    );
    let event = &sampling.events("validation_sampled")[0];
    assert_eq!(event["executor_host"], addr("p0"));
    assert_eq!(event["executor_node"], "n0");
    assert_eq!(event["rate_ppm"], "1000000");

    // The sidecar's view: the assigned validator's pending work.
    let v = validation(&w, &id);
    assert_eq!(v.sampled_height, w.chain.height());
    assert_eq!(v.deadline_height, w.chain.height() + 4);
    assert_eq!(
        pending(&w, &v.validator),
        vec![pb::PendingWork {
            kind: "validation".into(),
            inference_id: id.clone(),
            dispute_id: 0,
            model: MODEL.into(),
            executor_node: "n0".into(),
            executor_host: addr("p0"),
            transfer_agent: addr(TA),
            deadline_height: v.deadline_height,
        }]
    );
    let label = label_of(&v.validator);
    let before = balances(&w);
    let pool_before = pool(&w);

    let tx = w.tx(
        label,
        vec![msg_submit_validation(
            &v.validator,
            &id,
            &answer(truth("honest")),
        )],
    );
    let block = w.block(vec![tx]);
    assert_ok(&block, 0);
    // Committed: nothing is judged (or paid) until the TA reveals the output, which the
    // chain now asks it for.
    let v = validation(&w, &id);
    assert_eq!(v.status, "committed");
    assert_eq!(v.reveal_deadline_height, w.chain.height() + 3);
    assert!(pending(&w, &v.validator).is_empty());
    let due = w.query::<q::disputes::RevealsDue>(pb::QueryRevealsDueRequest {
        transfer_agent: addr(TA),
        ..Default::default()
    });
    assert_eq!(
        due.reveals,
        vec![pb::RevealDue {
            inference_id: id.clone(),
            deadline_height: v.reveal_deadline_height,
        }]
    );
    assert_eq!(pool(&w), pool_before);
    let block = reveal(&mut w, &rec);
    assert!(w
        .query::<q::disputes::RevealsDue>(pb::QueryRevealsDueRequest {
            transfer_agent: addr(TA),
            ..Default::default()
        })
        .reveals
        .is_empty());
    let submitted = &tx_events(block.result(0), "validation_submitted")[0];
    assert_eq!(submitted["outcome"], "match");
    assert_eq!(submitted["reward"], format!("{COST}ngnk"));

    // The validator earns the record's cost from the pool; the executor's batch is still
    // in its window: not paid, no work credited yet.
    assert_eq!(w.balance_of(label), before[label] + COST - FEE);
    assert_eq!(pool(&w), pool_before - COST);
    assert_eq!(w.balance_of("p0"), before["p0"]);
    assert_eq!(work_of(&w, "p0"), 0);
    let v = validation(&w, &id);
    assert_eq!((v.status.as_str(), v.reward.as_str()), ("matched", "1500"));
    assert!(pending(&w, &v.validator).is_empty());
    let s = stats(&w, "p0");
    let executor = s.executor.unwrap();
    assert_eq!(
        (
            executor.records,
            executor.sampled,
            executor.passed,
            executor.faults,
            executor.clean_streak
        ),
        (1, 1, 1, 0, 1)
    );
    let reputation = stats(&w, label).reputation.unwrap();
    assert_eq!((reputation.answered, reputation.score_ppm), (1, 1_000_000));
    assert!(w
        .query::<q::disputes::List>(pb::QueryDisputesRequest::default())
        .disputes
        .is_empty());
    // When the batch is final the executor keeps everything: the record's cost and its work.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), before["p0"] + COST);
    assert_eq!(work_of(&w, "p0"), TOKENS);
}

#[test]
fn cheating_executor_is_caught_and_slashed_exactly_20_percent() {
    let mut w = world(scenario_params());
    // p0 starts unbonding 100,000 first: the slash takes 20% of that too.
    let tx = w.tx("p0", vec![unstake_msg("p0", 100_000)]);
    assert_ok(&w.block(vec![tx]), 0);
    let alice_paid = w.balance_of("alice");
    let (id, accuser, block) = validate(&mut w, record("cheat", false), &answer(truth("cheat")));
    assert_eq!(w.balance_of("alice"), alice_paid);
    assert_eq!(w.escrow("alice", TA), ESCROW - COST, "paid from her escrow");
    let submitted = &tx_events(block.result(0), "validation_submitted")[0];
    assert_eq!(submitted["outcome"], "mismatch");
    let opened = &tx_events(block.result(0), "dispute_opened")[0];
    assert_eq!(opened["kind"], "validation");
    assert_eq!(opened["accuser"], addr(accuser));

    let d = drawn(&mut w, 0);
    assert_eq!(
        (d.inference_id.as_str(), d.status.as_str()),
        (id.as_str(), "open")
    );
    assert_eq!(d.claimed_hash, commitment("cheat", &lie("cheat")));
    // The accuser's result stays a commitment bound to it: nobody can copy it.
    assert_eq!(
        d.accuser_commitment,
        answer(truth("cheat")).commitment(&addr(accuser))
    );
    // Five participants minus the executor's host and the accuser leave exactly three.
    let committee: BTreeSet<&str> = d.committee.iter().map(|m| label_of(m)).collect();
    let expected: BTreeSet<&str> = ["p1", "p2", "p3", "p4"]
        .into_iter()
        .filter(|l| *l != accuser)
        .collect();
    assert_eq!(committee, expected);
    let (m1, m2, m3) = (
        label_of(&d.committee[0]),
        label_of(&d.committee[1]),
        label_of(&d.committee[2]),
    );
    // Every member sees the vote in its pending work.
    for member in &d.committee {
        let work = pending(&w, member);
        assert!(
            work.iter()
                .any(|p| p.kind == "dispute" && p.dispute_id == 0),
            "{work:?}"
        );
    }

    let before = balances(&w);
    let (pool_before, community_before) = (pool(&w), community(&w));
    let votes = vec![
        w.tx(
            m1,
            vec![msg_vote_dispute(&addr(m1), 0, &answer(truth("cheat")))],
        ),
        w.tx(
            m2,
            vec![msg_vote_dispute(&addr(m2), 0, &answer(truth("cheat")))],
        ),
    ];
    let block = w.block(votes);
    assert_ok(&block, 0);
    assert_ok(&block, 1);
    // The second vote is a majority of three: the dispute is decided at once.
    let resolved = &tx_events(block.result(1), "dispute_resolved")[0];
    assert_eq!(resolved["outcome"], "executor_faulted");
    assert_eq!(resolved["slashed"], addr("p0"));
    assert_eq!(resolved["slashed_amount"], format!("{SLASH}ngnk"));
    let slashed = &tx_events(block.result(1), "dispute_slashed")[0];
    assert_eq!(slashed["fraction_ppm"], "200000");

    // 20% of bonded 900,000 (180,000) and of unbonding 100,000 (20,000).
    assert_eq!(w.bonded("p0"), 720_000);
    assert_eq!(w.unbonding("p0")[0].amount, "80000");
    // The requester is refunded (to her balance) from the host's balance, although the
    // host's batch has not paid it yet; the slash (200,000) is split over the accuser and
    // the two majority voters: 66,666 each, dust 2 to the community pool. Each honest
    // re-execution also earns the record's cost from the pool.
    let share = SLASH / 3;
    assert_eq!(share, 66_666);
    assert_eq!(w.balance_of("alice"), before["alice"] + COST);
    assert_eq!(w.balance_of("p0"), before["p0"] - COST);
    assert_eq!(w.balance_of(accuser), before[accuser] + share + COST);
    assert_eq!(w.balance_of(m1), before[m1] + share + COST - FEE);
    assert_eq!(w.balance_of(m2), before[m2] + share + COST - FEE);
    assert_eq!(w.balance_of(m3), before[m3], "the member who did not vote");
    assert_eq!(community(&w), community_before + 2);
    assert_eq!(pool(&w), pool_before - 3 * COST);
    assert_eq!(escrow(&w), 0);
    assert_eq!(
        w.escrow("alice", TA),
        ESCROW - COST,
        "the refund is not to the escrow"
    );
    // The faked work is not credited yet (its batch is pending): it is owed instead.
    assert_eq!(work_of(&w, "p0"), 0);
    assert_eq!(w.participant("p0").work_debt, TOKENS);

    let d = dispute(&w, 0);
    assert_eq!(d.status, "executor_faulted");
    assert_eq!(d.resolved_height, w.chain.height());
    let expected: Vec<(String, u128, String)> = vec![
        (addr("alice"), COST, "refund".into()),
        (addr(accuser), share, "slash_share".into()),
        (addr(m1), share, "slash_share".into()),
        (addr(m2), share, "slash_share".into()),
        (gonka_rewards::community_pool_address(), 2, "dust".into()),
        (addr(accuser), COST, "validation_reward".into()),
        (addr(m1), COST, "validation_reward".into()),
        (addr(m2), COST, "validation_reward".into()),
    ];
    assert_eq!(payouts(&d), expected);
    // The executor's record is back at the start: it is checked at the maximum again.
    let s = stats(&w, "p0");
    let executor = s.executor.unwrap();
    assert_eq!((executor.faults, executor.clean_streak), (1, 0));
    assert_eq!(s.current_rate_ppm, 1_000_000);
    let listed = w.query::<q::disputes::List>(pb::QueryDisputesRequest {
        status: "executor_faulted".into(),
        ..Default::default()
    });
    assert_eq!(listed.disputes.len(), 1);
    for label in ["p0", accuser, m1, m2, m3] {
        let of = w.query::<q::disputes::Participant>(pb::QueryParticipantDisputesRequest {
            address: addr(label),
            ..Default::default()
        });
        assert_eq!(of.disputes.len(), 1, "{label}");
    }
    assert!(
        pending(&w, &addr(m3)).is_empty(),
        "a decided dispute is owed no more"
    );
    // The batch becomes final: its payout only makes up the refund the host paid, and its
    // work credit only pays the debt. The executor keeps nothing of the faked record.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), before["p0"]);
    assert_eq!(work_of(&w, "p0"), 0, "the faked work is never counted");
    assert_eq!(w.participant("p0").work_debt, 0, "the debt is paid off");
}

#[test]
fn false_accusation_is_punished() {
    let mut w = world(scenario_params());
    let (_, accuser, block) = validate(&mut w, record("fine", true), &answer(lie("fine")));
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "mismatch"
    );
    let d = drawn(&mut w, 0);
    let (m1, m2) = (label_of(&d.committee[0]), label_of(&d.committee[1]));
    let before = balances(&w);
    let (pool_before, community_before) = (pool(&w), community(&w));
    let votes = vec![
        w.tx(
            m1,
            vec![msg_vote_dispute(&addr(m1), 0, &answer(truth("fine")))],
        ),
        w.tx(
            m2,
            vec![msg_vote_dispute(&addr(m2), 0, &answer(truth("fine")))],
        ),
    ];
    let block = w.block(votes);
    assert_ok(&block, 1);
    assert_eq!(
        tx_events(block.result(1), "dispute_resolved")[0]["outcome"],
        "executor_upheld"
    );
    // The accuser loses 20% of its bond, split over the executor's host and the majority.
    assert_eq!(w.bonded(accuser), BOND - SLASH);
    let share = SLASH / 3;
    assert_eq!(w.balance_of(accuser), before[accuser]);
    assert_eq!(w.balance_of("p0"), before["p0"] + share);
    assert_eq!(w.balance_of(m1), before[m1] + share + COST - FEE);
    assert_eq!(w.balance_of(m2), before[m2] + share + COST - FEE);
    assert_eq!(w.balance_of("alice"), before["alice"], "no refund");
    assert_eq!(w.escrow("alice", TA), ESCROW - COST);
    assert_eq!(community(&w), community_before + 2);
    assert_eq!(pool(&w), pool_before - 2 * COST);
    assert_eq!(w.participant("p0").work_debt, 0, "nothing is owed");
    let d = dispute(&w, 0);
    assert_eq!(
        (d.status.as_str(), d.slashed.as_str()),
        ("executor_upheld", addr(accuser).as_str())
    );
    let reputation = stats(&w, accuser).reputation.unwrap();
    assert_eq!(reputation.false_accusations, 1);
    let executor = stats(&w, "p0").executor.unwrap();
    assert_eq!((executor.passed, executor.clean_streak), (1, 1));
    // The honest work is paid and credited when its batch is final.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), before["p0"] + share + COST);
    assert_eq!(work_of(&w, "p0"), TOKENS, "honest work is credited");
}

#[test]
fn user_dispute_won_refunds_returns_the_deposit_and_pays_a_share() {
    let mut w = world(unsampled_params());
    let rec = record("user-won", false);
    let before_open = balances(&w);
    dispute_unsampled(&mut w, &rec, MIN_DEPOSIT);
    assert_eq!(escrow(&w), MIN_DEPOSIT);
    // The dispute asks the TA for the output its votes are judged by.
    reveal(&mut w, &rec);
    let d = dispute(&w, 0);
    assert_eq!((d.kind.as_str(), d.deposit.as_str()), ("user", "10000"));
    // alice is not a participant: four candidates besides the executor's host, three seats.
    assert_eq!(d.committee.len(), 3);
    assert!(!d.committee.contains(&addr("p0")));
    let (m1, m2) = (label_of(&d.committee[0]), label_of(&d.committee[1]));
    let before = balances(&w);
    let votes = vec![
        w.tx(
            m1,
            vec![msg_vote_dispute(&addr(m1), 0, &answer(truth("user-won")))],
        ),
        w.tx(
            m2,
            vec![msg_vote_dispute(&addr(m2), 0, &answer(truth("user-won")))],
        ),
    ];
    let block = w.block(votes);
    assert_ok(&block, 1);
    let share = SLASH / 3;
    assert_eq!(w.bonded("p0"), BOND - SLASH);
    assert_eq!(
        w.balance_of("alice"),
        before_open["alice"] - FEE + COST + share,
        "deposit back, cost refunded, a third of the slash"
    );
    assert_eq!(w.balance_of("p0"), before["p0"] - COST);
    assert_eq!(w.balance_of(m1), before[m1] + share + COST - FEE);
    assert_eq!(escrow(&w), 0);
    assert_eq!(w.participant("p0").work_debt, TOKENS);
    let d = dispute(&w, 0);
    let expected: Vec<(String, u128, String)> = vec![
        (addr("alice"), COST, "refund".into()),
        (addr("alice"), MIN_DEPOSIT, "deposit_return".into()),
        (addr("alice"), share, "slash_share".into()),
        (addr(m1), share, "slash_share".into()),
        (addr(m2), share, "slash_share".into()),
        (gonka_rewards::community_pool_address(), 2, "dust".into()),
        (addr(m1), COST, "validation_reward".into()),
        (addr(m2), COST, "validation_reward".into()),
    ];
    assert_eq!(payouts(&d), expected);
    // The batch's payout only makes up the refund; its work credit only pays the debt.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), before["p0"]);
    assert_eq!(work_of(&w, "p0"), 0);
    assert_eq!(w.participant("p0").work_debt, 0);
}

#[test]
fn the_refund_comes_from_the_slash_when_the_host_cannot_pay() {
    let mut w = world(unsampled_params());
    let rec = record("poor", false);
    let (batch, batch_id) = settle_unsampled(&mut w, &rec);
    // p0 keeps only 500 ngnk of liquid balance (its batch has not paid it yet).
    let keep = 500;
    let away = w.balance_of("p0") - keep - FEE;
    let tx = w.tx(
        "p0",
        vec![gonka_client::msg_send(&addr("p0"), &addr("bob"), away)],
    );
    assert_ok(&w.block(vec![tx]), 0);
    let proof = batch.leaf_proof(0).unwrap();
    let tx = w.tx(
        "alice",
        vec![msg_dispute_leaf(
            &addr("alice"),
            batch_id,
            proof,
            MIN_DEPOSIT,
        )],
    );
    assert_ok(&w.block(vec![tx]), 0);
    reveal(&mut w, &rec);
    let d = dispute(&w, 0);
    let (m1, m2) = (label_of(&d.committee[0]), label_of(&d.committee[1]));
    let alice = w.balance_of("alice");
    let votes = vec![
        w.tx(
            m1,
            vec![msg_vote_dispute(&addr(m1), 0, &answer(truth("poor")))],
        ),
        w.tx(
            m2,
            vec![msg_vote_dispute(&addr(m2), 0, &answer(truth("poor")))],
        ),
    ];
    assert_ok(&w.block(votes), 1);
    // 500 from the host, the other 1,000 from the 200,000 slashed; 199,000 shared by three
    // (66,333 each), dust 1.
    let share = (SLASH - (COST - keep)) / 3;
    assert_eq!(share, 66_333);
    let d = dispute(&w, 0);
    assert_eq!(
        payouts(&d)[..6].to_vec(),
        vec![
            (addr("alice"), keep, "refund".to_string()),
            (addr("alice"), COST - keep, "refund".into()),
            (addr("alice"), MIN_DEPOSIT, "deposit_return".into()),
            (addr("alice"), share, "slash_share".into()),
            (addr(m1), share, "slash_share".into()),
            (addr(m2), share, "slash_share".into()),
        ]
    );
    assert_eq!(payouts(&d)[6].1, 1, "dust");
    assert_eq!(w.balance_of("p0"), 0);
    assert_eq!(w.balance_of("alice"), alice + COST + MIN_DEPOSIT + share);
    assert_eq!(escrow(&w), 0);
    // The batch's payout is not held back for the faulted record: when the batch is final
    // the host gets the record's cost although the slash paid most of the refund.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), COST);
}

#[test]
fn a_committee_larger_than_the_candidates_shrinks_to_an_odd_size() {
    let mut w = world(pb::Params {
        committee_size: 5,
        ..unsampled_params()
    });
    let rec = record("few", true);
    dispute_unsampled(&mut w, &rec, MIN_DEPOSIT);
    // Four candidates (p1..p4) for five seats: all four drawn, the last one dropped.
    let d = drawn(&mut w, 0);
    assert_eq!(d.committee.len(), 3);
    let distinct: BTreeSet<&String> = d.committee.iter().collect();
    assert_eq!(distinct.len(), 3);
    assert!(!d.committee.contains(&addr("p0")));
}

#[test]
fn user_dispute_lost_forfeits_the_deposit_to_the_executor() {
    let mut w = world(unsampled_params());
    let rec = record("user-lost", true);
    let before_open = balances(&w);
    dispute_unsampled(&mut w, &rec, MIN_DEPOSIT + 5);
    reveal(&mut w, &rec);
    let d = dispute(&w, 0);
    let (m1, m2) = (label_of(&d.committee[0]), label_of(&d.committee[1]));
    let before = balances(&w);
    let pool_before = pool(&w);
    let votes = vec![
        w.tx(
            m1,
            vec![msg_vote_dispute(&addr(m1), 0, &answer(truth("user-lost")))],
        ),
        w.tx(
            m2,
            vec![msg_vote_dispute(&addr(m2), 0, &answer(truth("user-lost")))],
        ),
    ];
    let block = w.block(votes);
    assert_ok(&block, 1);
    assert_eq!(dispute(&w, 0).status, "executor_upheld");
    assert_eq!(
        w.balance_of("alice"),
        before_open["alice"] - FEE - MIN_DEPOSIT - 5
    );
    assert_eq!(w.balance_of("p0"), before["p0"] + MIN_DEPOSIT + 5);
    assert_eq!(w.bonded("p0"), BOND, "nobody is slashed");
    assert_eq!(w.balance_of(m1), before[m1] + COST - FEE);
    assert_eq!(pool(&w), pool_before - 2 * COST);
    assert_eq!(escrow(&w), 0);
    assert_eq!(w.participant("p0").work_debt, 0);
    // The upheld work is paid and credited when its batch is final.
    until_batches_final(&mut w, TA);
    assert_eq!(w.balance_of("p0"), before["p0"] + MIN_DEPOSIT + 5 + COST);
    assert_eq!(work_of(&w, "p0"), TOKENS);
}

/// A requester disputes an answer nobody sampled with the leaf and proof its TA serves
/// (MsgDisputeLeaf); a stranger, a proof off the root, a second dispute of the stored record
/// and a leaf of a batch settled more than `dispute_window_blocks` ago are refused, each
/// changing nothing. On the old chain, only a sampled or demanded leaf could be disputed
/// ("disputes 8: no work record" for 90% of answers).
#[test]
fn a_requester_disputes_an_unsampled_answer_with_its_leaf_and_strangers_or_stale_leaves_are_refused(
) {
    let mut w = world(unsampled_params());
    let rec = record("by-proof", true);
    let (batch, id) = settle_unsampled(&mut w, &rec);
    let old = record_on(0, "too-old", true, (100, 50));
    let (old_batch, old_id) = settle_unsampled(&mut w, &old);
    let proof = batch.leaf_proof(0).unwrap();
    let mut off_root = proof.clone();
    off_root.leaf.as_mut().unwrap().cost = "1".into();
    let before = balances(&w);
    let cases = [
        (
            "bob",
            msg_dispute_leaf(&addr("bob"), id, proof.clone(), MIN_DEPOSIT),
            ("disputes", 11),
            "only the requester",
        ),
        (
            "alice",
            msg_dispute_leaf(&addr("alice"), id, off_root, MIN_DEPOSIT),
            ("settlement", 13),
            "",
        ),
        (
            "alice",
            msg_dispute_leaf(&addr("alice"), id + 7, proof.clone(), MIN_DEPOSIT),
            ("settlement", 11),
            "no batch",
        ),
        (
            "alice",
            msg_dispute_leaf(&addr("alice"), id, proof.clone(), MIN_DEPOSIT - 1),
            ("disputes", 10),
            "at least",
        ),
    ];
    for (signer, msg, code, fragment) in cases {
        let tx = w.tx(signer, vec![msg]);
        let result = w.block(vec![tx]).result(0).clone();
        assert_eq!(
            (result.codespace.as_str(), result.code),
            code,
            "{}",
            result.log
        );
        assert!(result.log.contains(fragment), "{}", result.log);
    }
    let mut after = balances(&w);
    for label in ["alice", "bob"] {
        let fees = if label == "alice" { 3 } else { 1 };
        *after.get_mut(label).unwrap() += fees * FEE;
    }
    assert_eq!(after, before, "refusals move nothing but their fees");
    assert!(w
        .query::<q::disputes::List>(pb::QueryDisputesRequest::default())
        .disputes
        .is_empty());
    let tx = w.tx(
        "alice",
        vec![msg_dispute_leaf(
            &addr("alice"),
            id,
            proof.clone(),
            MIN_DEPOSIT,
        )],
    );
    let block = w.block(vec![tx]);
    assert_ok(&block, 0);
    assert_eq!(escrow(&w), MIN_DEPOSIT);
    let d = dispute(&w, 0);
    assert_eq!(
        (d.inference_id.as_str(), d.kind.as_str(), d.accuser.as_str()),
        (rec.inference_id.as_str(), "user", addr("alice").as_str())
    );
    assert_eq!(d.executor_host, addr("p0"));
    assert!(
        w.block(vec![]).events("validation_sampled").is_empty(),
        "a disputed record is judged by its committee, not sampled again"
    );
    let tx = w.tx(
        "alice",
        vec![msg_dispute_leaf(&addr("alice"), id, proof, MIN_DEPOSIT)],
    );
    let result = w.block(vec![tx]).result(0).clone();
    assert_eq!((result.codespace.as_str(), result.code), ("settlement", 18));
    assert!(result.log.contains("MsgOpenDispute"), "{}", result.log);
    // The older batch's window closes dispute_window_blocks after its own block.
    let window = unsampled_params().dispute_window_blocks;
    let settled_at = batch_height(&w, old_id);
    while w.chain.height() <= settled_at + window {
        w.block(vec![]);
    }
    let tx = w.tx(
        "alice",
        vec![msg_dispute_leaf(
            &addr("alice"),
            old_id,
            old_batch.leaf_proof(0).unwrap(),
            MIN_DEPOSIT,
        )],
    );
    assert_err(
        w.block(vec![tx]).result(0),
        16,
        "could be disputed until",
        "a stale leaf",
    );
}

/// Height of the block that settled batch `id`.
fn batch_height(world: &World, id: u64) -> u64 {
    world
        .query::<q::settlement::Batch>(spb::QueryBatchRequest {
            id,
            ..Default::default()
        })
        .batch
        .unwrap()
        .height
}

#[test]
fn a_dispute_nobody_votes_on_is_undecided_and_its_members_lose_reputation() {
    let mut w = world(unsampled_params());
    let rec = record("silent", false);
    let alice = w.balance_of("alice");
    dispute_unsampled(&mut w, &rec, MIN_DEPOSIT);
    reveal(&mut w, &rec);
    let d = dispute(&w, 0);
    while w.chain.height() <= d.deadline_height {
        assert_eq!(dispute(&w, 0).status, "open");
        w.block(vec![]);
    }
    let d = dispute(&w, 0);
    assert_eq!(
        (d.status.as_str(), d.resolved_height),
        ("undecided", d.deadline_height + 1)
    );
    assert_eq!(
        w.balance_of("alice"),
        alice - FEE - MIN_DEPOSIT / 2,
        "half the deposit is returned: an undecided dispute is not free"
    );
    assert_eq!(w.bonded("p0"), BOND);
    for member in &d.committee {
        let reputation = stats(&w, label_of(member)).reputation.unwrap();
        assert_eq!(
            (
                reputation.missed,
                reputation.missed_in_row,
                reputation.score_ppm
            ),
            (1, 1, 900_000)
        );
    }
}

#[test]
fn missed_validations_cost_reputation_then_jail() {
    let mut w = world(pb::Params {
        validation_deadline_blocks: 2,
        jail_after_misses: 2,
        ..scenario_params()
    });
    let records: Vec<WorkRecord> = (0..6).map(|i| record(&format!("m{i}"), true)).collect();
    let ids: Vec<String> = records.iter().map(|r| r.inference_id.clone()).collect();
    settle(&mut w, &records);
    let mut assigned: BTreeMap<&str, u64> = BTreeMap::new();
    for id in &ids {
        *assigned
            .entry(label_of(&validation(&w, id).validator))
            .or_default() += 1;
    }
    // Six validations over four validators: someone has at least two.
    assert!(assigned.values().any(|n| *n >= 2), "{assigned:?}");
    let deadline = validation(&w, &ids[0]).deadline_height;
    while w.chain.height() <= deadline {
        w.block(vec![]);
    }
    for id in &ids {
        assert_eq!(validation(&w, id).status, "missed");
    }
    for validator in ["p1", "p2", "p3", "p4"] {
        let misses = assigned.get(validator).copied().unwrap_or(0);
        let reputation = stats(&w, validator).reputation.unwrap();
        assert_eq!(
            (
                reputation.missed,
                reputation.missed_in_row,
                reputation.score_ppm
            ),
            (misses, misses % 2, 1_000_000 - 100_000 * misses),
            "{validator}"
        );
        let participant = w.participant(validator);
        assert_eq!(participant.jailed, misses >= 2, "{validator}");
        if misses >= 2 {
            assert_eq!(participant.power, 0, "{validator} left the validator set");
        }
    }
    // Jailed validators are assigned nothing more.
    let jailed: BTreeSet<String> = ["p1", "p2", "p3", "p4"]
        .into_iter()
        .filter(|l| w.participant(l).jailed)
        .map(addr)
        .collect();
    // More work, settled by another transfer agent: the executor's host p0 itself (never
    // assigned its own records; alice escrows for it too), so every participant but p0 and
    // the jailed is a candidate to validate it.
    let txs = vec![
        w.tx("p0", vec![register_ta("p0", "https://p0.example")]),
        w.tx(
            "alice",
            vec![msg_open_escrow(
                &addr("alice"),
                &addr("p0"),
                ESCROW,
                ESCROW_EXPIRY,
            )],
        ),
    ];
    let block = w.block(txs);
    assert_ok(&block, 0);
    assert_ok(&block, 1);
    let more: Vec<WorkRecord> = (0..8)
        .map(|i| {
            let input = request(
                "p0",
                &format!("n{i}"),
                MODEL,
                exec("p0", "n0", 10),
                (100, 50),
                0,
            );
            signed_record("alice", 10, &input)
        })
        .collect();
    let more_ids: Vec<String> = more.iter().map(|r| r.inference_id.clone()).collect();
    commit_batch(&mut w, "p0", &more, host_of);
    w.block(vec![]);
    for id in &more_ids {
        let validator = validation(&w, id).validator;
        assert!(!jailed.contains(&validator));
    }
}

#[test]
fn bad_inputs_are_refused_with_their_code_and_change_nothing() {
    // One block more for the validations and reveals than the scenario: the committees of
    // the disputes below are drawn in a block of their own, and F must still be pending and
    // G's output still awaited after it.
    let mut w = world(pb::Params {
        validation_deadline_blocks: 5,
        reveal_deadline_blocks: 4,
        ..scenario_params()
    });
    // A: validated (match). B: its deadline passes.
    let (a, a_validator, _) = validate(&mut w, record("a", true), &answer(truth("a")));
    let b_rec = record("b", true);
    let b = b_rec.inference_id.clone();
    settle(&mut w, &[b_rec]);
    let b_validation = validation(&w, &b);
    while validation(&w, &b).status != "missed" {
        w.block(vec![]);
    }
    // C: mismatch, dispute 0, one vote. E: mismatch, dispute 1, decided. F: pending.
    // G: committed, its output not revealed yet.
    let (c, e, f, g) = (
        record("c", false),
        record("e", false),
        record("f", true),
        record("g", true),
    );
    let (c_id, e_id, f_id, g_id) = (
        c.inference_id.clone(),
        e.inference_id.clone(),
        f.inference_id.clone(),
        g.inference_id.clone(),
    );
    settle(&mut w, &[c.clone(), e.clone(), f.clone(), g]);
    let (vc, ve, vg) = (
        validation(&w, &c_id),
        validation(&w, &e_id),
        validation(&w, &g_id),
    );
    let mismatches = vec![
        w.tx(
            label_of(&vc.validator),
            vec![msg_submit_validation(
                &vc.validator,
                &c_id,
                &answer(truth("c")),
            )],
        ),
        w.tx(
            label_of(&ve.validator),
            vec![msg_submit_validation(
                &ve.validator,
                &e_id,
                &answer(truth("e")),
            )],
        ),
        w.tx(
            label_of(&vg.validator),
            vec![msg_submit_validation(
                &vg.validator,
                &g_id,
                &answer(truth("g")),
            )],
        ),
    ];
    let block = w.block(mismatches);
    for i in 0..3 {
        assert_ok(&block, i);
    }
    let tx = w.tx(TA, vec![reveal_msg(TA, &c), reveal_msg(TA, &e)]);
    assert_ok(&w.block(vec![tx]), 0);
    let (d0, d1) = (drawn(&mut w, 0), dispute(&w, 1));
    assert_eq!(d0.inference_id, c_id);
    let voted = label_of(&d0.committee[0]);
    let e_voters = (label_of(&d1.committee[0]), label_of(&d1.committee[1]));
    let votes = vec![
        w.tx(
            voted,
            vec![msg_vote_dispute(&addr(voted), 0, &answer(truth("c")))],
        ),
        w.tx(
            e_voters.0,
            vec![msg_vote_dispute(&addr(e_voters.0), 1, &answer(truth("e")))],
        ),
        w.tx(
            e_voters.1,
            vec![msg_vote_dispute(&addr(e_voters.1), 1, &answer(truth("e")))],
        ),
    ];
    let block = w.block(votes);
    for i in 0..3 {
        assert_ok(&block, i);
    }
    assert_eq!(dispute(&w, 1).status, "executor_faulted");
    let vf = validation(&w, &f_id);
    assert!(
        w.chain.height() < vf.deadline_height,
        "F must still be pending"
    );
    let intruder = ["p1", "p2", "p3", "p4"]
        .into_iter()
        .find(|l| addr(l) != vf.validator)
        .unwrap();
    let outsider = "p0";
    let closed_member = label_of(&d1.committee[0]);

    let snapshot = |w: &World| {
        (
            w.raw_prefix(b"disputes/"),
            w.raw_prefix(b"stake/"),
            w.raw_prefix(b"inference/"),
        )
    };
    let state_before = snapshot(&w);
    let before = balances(&w);
    let unknown = hex::encode(Sha256::digest("no such record"));
    let b_label = label_of(&b_validation.validator);
    // (signer, message, code, log fragment)
    let cases: Vec<(&str, Any, u32, &str)> = vec![
        (
            intruder,
            msg_submit_validation(&addr(intruder), &f_id, &answer(truth("f"))),
            5,
            "is assigned to",
        ),
        (
            b_label,
            msg_submit_validation(&b_validation.validator, &b, &answer(truth("b"))),
            6,
            "was due by height",
        ),
        (
            a_validator,
            msg_submit_validation(&addr(a_validator), &a, &answer(truth("a"))),
            7,
            "already submitted",
        ),
        (
            "p1",
            msg_submit_validation(&addr("p1"), &unknown, &answer(truth("x"))),
            8,
            "no work record",
        ),
        (
            "alice",
            msg_open_dispute(&addr("alice"), &unknown, MIN_DEPOSIT),
            8,
            "no work record",
        ),
        (
            "alice",
            msg_open_dispute(&addr("alice"), &e_id, MIN_DEPOSIT),
            9,
            "already has dispute 1 (executor_faulted)",
        ),
        (
            "alice",
            msg_open_dispute(&addr("alice"), &c_id, MIN_DEPOSIT),
            9,
            "already has dispute 0 (open)",
        ),
        (
            "alice",
            msg_open_dispute(&addr("alice"), &f_id, MIN_DEPOSIT - 1),
            10,
            "at least 10000ngnk, found 9999ngnk",
        ),
        (
            "bob",
            msg_open_dispute(&addr("bob"), &f_id, MIN_DEPOSIT),
            11,
            "only the requester",
        ),
        (
            "p1",
            msg_vote_dispute(&addr("p1"), 99, &answer(truth("x"))),
            12,
            "no dispute with id 99",
        ),
        (
            outsider,
            msg_vote_dispute(&addr(outsider), 0, &answer(truth("c"))),
            13,
            "is not on the committee of dispute 0",
        ),
        (
            voted,
            msg_vote_dispute(&addr(voted), 0, &answer(truth("c"))),
            14,
            "already voted on dispute 0",
        ),
        (
            closed_member,
            msg_vote_dispute(&addr(closed_member), 1, &answer(truth("e"))),
            15,
            "was resolved (executor_faulted)",
        ),
        (
            "p1",
            msg_reveal_output(&addr("p1"), &g_id, &salt("g"), &truth("g")),
            17,
            "only the record's transfer agent",
        ),
        (
            TA,
            reveal_msg(TA, &f),
            18,
            "only after the assigned validator has committed",
        ),
        (TA, reveal_msg(TA, &c), 19, "was revealed by"),
        (
            TA,
            msg_reveal_output(&addr(TA), &g_id, &salt("g"), &lie("g")),
            20,
            "do not open the output commitment",
        ),
    ];
    let mut txs: Vec<Vec<u8>> = cases
        .iter()
        .map(|(signer, msg, _, _)| w.tx(signer, vec![msg.clone()]))
        .collect();
    // Stateless: refused before the ante step, so no fee and no sequence.
    let short_hash = Any {
        type_url: "/gonka.disputes.v1.MsgVoteDispute".into(),
        value: prost::Message::encode_to_vec(&pb::MsgVoteDispute {
            voter: addr("p1"),
            dispute_id: 0,
            result_commitment: vec![1; 31],
            payload_unavailable: false,
            ..Default::default()
        }),
    };
    txs.push(w.tx_unsequenced("p1", vec![short_hash]));
    txs.push(w.tx_unsequenced(
        "alice",
        vec![msg_open_dispute(&addr("alice"), "ABC", MIN_DEPOSIT)],
    ));
    let block = w.block(txs);
    for (i, (_, _, code, fragment)) in cases.iter().enumerate() {
        assert_err(block.result(i), *code, fragment, &format!("case {i}"));
        let kinds: Vec<&str> = block
            .result(i)
            .events
            .iter()
            .map(|e| e.r#type.as_str())
            .collect();
        assert!(
            !kinds
                .iter()
                .any(|k| k.starts_with("dispute") || k.starts_with("validation")),
            "case {i} emitted {kinds:?}"
        );
    }
    assert_err(
        block.result(cases.len()),
        3,
        "must be 32 bytes",
        "short hash",
    );
    assert_err(
        block.result(cases.len() + 1),
        3,
        "64 lowercase hex",
        "bad id",
    );

    assert!(snapshot(&w) == state_before, "a rejection changed state");
    let mut fees: BTreeMap<&str, u128> = BTreeMap::new();
    for (signer, _, _, _) in &cases {
        *fees.entry(signer).or_default() += FEE;
    }
    for (label, balance) in before {
        let fee = fees.get(label).copied().unwrap_or(0);
        assert_eq!(
            w.balance_of(label),
            balance - fee,
            "{label} paid more than fees"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Validation by log-probabilities ("logprobs" models)

/// Alternatives per position and the threshold (2^-16 nats) of the scenario's inexact model.
const TOP_K: u32 = 2;
const THRESHOLD: u64 = 1_000;
const POSITION_THRESHOLD: u64 = 50_000;

/// [`world`] whose model is validated by log-probabilities.
fn scored_world() -> World {
    world_of(
        scenario_params(),
        json!({
            "id": MODEL, "price_per_token": PRICE.to_string(), "min_vram_mib": 0,
            "validation": "logprobs", "logprob_top_k": TOP_K, "logprob_threshold": THRESHOLD,
            "logprob_position_threshold": POSITION_THRESHOLD,
        }),
    )
}

/// A scenario answer (100 prompt tokens, 50 completion tokens and the stop token) as a model
/// scores it: token `i` at position `i`, most likely at `-1000·(i % 7)` plus `shift`, the
/// runner-up 2 nats lower (2^-16 units). Two honest implementations differ by a small
/// `shift`; another model by a large one.
fn scores(shift: i32) -> pb::ScoredOutput {
    let positions = (0..51u32)
        .map(|i| {
            let top = -1_000 * (i % 7) as i32 - shift.abs();
            pb::ScoredToken {
                token: i,
                logprob: top,
                top_tokens: vec![i, 1_000 + i],
                top_logprobs: vec![top, top - 131_072],
            }
        })
        .collect();
    pb::ScoredOutput {
        prompt_tokens: 100,
        positions,
    }
}

/// A record of request `nonce` on n0 whose receipt commits to `executor`'s scores.
fn scored_record(nonce: &str, executor: &pb::ScoredOutput) -> WorkRecord {
    let mut input = request(TA, nonce, MODEL, exec("p0", "n0", 10), (100, 50), 0);
    input.scored = Some(executor.clone());
    signed_record("alice", 10, &input)
}

/// Settles `rec`, has its assigned validator submit `validator_scores` and the TA reveal
/// `executor` (the scores the record commits to); returns the record id, the validator's
/// label and the revealing block.
fn validate_scored(
    w: &mut World,
    rec: &WorkRecord,
    executor: &pb::ScoredOutput,
    validator_scores: &pb::ScoredOutput,
) -> (String, &'static str, Block) {
    let id = rec.inference_id.clone();
    settle(w, std::slice::from_ref(rec));
    let v = validation(w, &id);
    let label = label_of(&v.validator);
    let tx = w.tx(
        label,
        vec![msg_submit_validation(&v.validator, &id, validator_scores)],
    );
    let block = w.block(vec![tx]);
    assert_ok(&block, 0);
    let stored = validation(w, &id);
    assert_eq!(stored.status, "committed");
    assert_eq!(stored.scored.as_ref(), Some(validator_scores));
    let tx = w.tx(
        TA,
        vec![msg_reveal_scored_output(
            &addr(TA),
            &id,
            &salt(&rec.nonce),
            executor,
        )],
    );
    let block = w.block(vec![tx]);
    assert_ok(&block, 0);
    (id, label, block)
}

#[test]
fn logprobs_validation_passes_a_close_scorer_and_pays_it() {
    let mut w = scored_world();
    let executor = scores(0);
    let rec = scored_record("close", &executor);
    // Another implementation: every log-probability 900 units (0.014 nats) off, within the
    // threshold of 1,000.
    let pool_before = pool(&w);
    let (id, label, block) = validate_scored(&mut w, &rec, &executor, &scores(900));
    let submitted = &tx_events(block.result(0), "validation_submitted")[0];
    assert_eq!(submitted["outcome"], "match");
    let v = validation(&w, &id);
    assert_eq!((v.status.as_str(), v.reward.as_str()), ("matched", "1500"));
    assert_eq!(
        pool(&w),
        pool_before - COST,
        "{label} was paid from the pool"
    );
    assert_eq!(stats(&w, "p0").executor.unwrap().passed, 1);
}

#[test]
fn logprobs_validation_catches_another_model_and_its_committee_slashes_it() {
    let mut w = scored_world();
    // The executor ran another model: its scores are 1,500 units per log-probability off the
    // real model's, past the threshold of 1,000.
    let executor = scores(1_500);
    let honest = scores(0);
    let rec = scored_record("other-model", &executor);
    let p0_bonded = w.bonded("p0");
    let (_, accuser, block) = validate_scored(&mut w, &rec, &executor, &honest);
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "mismatch"
    );
    assert_eq!(
        tx_events(block.result(0), "dispute_opened")[0]["accuser"],
        addr(accuser)
    );
    let d = drawn(&mut w, 0);
    // Two members score with the real model (one of them 300 units off, still 1,200 from
    // the executor), which is a majority of three against the executor.
    let votes = vec![
        w.tx(
            label_of(&d.committee[0]),
            vec![msg_vote_dispute(&d.committee[0], 0, &honest)],
        ),
        w.tx(
            label_of(&d.committee[1]),
            vec![msg_vote_dispute(&d.committee[1], 0, &scores(300))],
        ),
    ];
    let block = w.block(votes);
    assert_ok(&block, 0);
    assert_ok(&block, 1);
    let resolved = &tx_events(block.result(1), "dispute_resolved")[0];
    assert_eq!(resolved["outcome"], "executor_faulted");
    assert_eq!(w.bonded("p0"), p0_bonded - SLASH);
}

#[test]
fn logprobs_validation_catches_one_fabricated_position_the_mean_hides() {
    let mut w = scored_world();
    // An answer cut short with a stop token appended, whose scores at that last position
    // the executor made up: 60,000 units (0.9 nats) off the model's for the token and its
    // runner-up view. Spread over 51 positions the mean stays under the threshold; the
    // position bound does not.
    let honest = scores(0);
    let mut executor = honest.clone();
    let last = executor.positions.last_mut().unwrap();
    last.logprob -= 60_000;
    last.top_logprobs[0] -= 60_000;
    let rec = scored_record("cut-short", &executor);
    let distance = gonka_proto::scored::compare(&executor, &honest).unwrap();
    assert!(distance.within(THRESHOLD) && distance.worst_position > POSITION_THRESHOLD);
    let (_, _, block) = validate_scored(&mut w, &rec, &executor, &honest);
    assert_eq!(
        tx_events(block.result(0), "validation_submitted")[0]["outcome"],
        "mismatch"
    );
}

#[test]
fn logprobs_results_of_the_wrong_kind_or_shape_are_refused() {
    let mut w = scored_world();
    let executor = scores(0);
    let rec = scored_record("shapes", &executor);
    let id = rec.inference_id.clone();
    settle(&mut w, std::slice::from_ref(&rec));
    let v = validation(&w, &id);
    let label = label_of(&v.validator);
    let mut three_alternatives = scores(0);
    for p in &mut three_alternatives.positions {
        p.top_tokens.push(5_000);
        p.top_logprobs.push(-900_000);
    }
    let mut no_stop_and_one_more = scores(0);
    no_stop_and_one_more.positions.truncate(49);
    let mut unsorted = scores(0);
    unsorted.positions[3].top_logprobs.swap(0, 1);
    let cases: Vec<(Any, u32, &str)> = vec![
        (
            msg_submit_validation(&v.validator, &id, &answer(truth("shapes"))),
            21,
            "validated by log-probabilities",
        ),
        (
            msg_submit_validation(&v.validator, &id, &three_alternatives),
            21,
            "logprob_top_k is 2",
        ),
        (
            msg_submit_validation(&v.validator, &id, &no_stop_and_one_more),
            21,
            "49 positions for a record of 50 completion tokens",
        ),
        (
            msg_submit_validation(&v.validator, &id, &unsorted),
            3,
            "most likely first",
        ),
    ];
    // One block: the validation's deadline is 4 blocks away.
    refused_in_one_block(&mut w, label, &cases);
    assert_eq!(validation(&w, &id).status, "pending");
    let tx = w.tx(
        label,
        vec![msg_submit_validation(&v.validator, &id, &scores(0))],
    );
    assert_ok(&w.block(vec![tx]), 0);
    // The reveal must open the commitment with the scores the executor committed to: a text
    // answer, other scores or another prompt count do not.
    let (salt, truth_hash) = (salt("shapes"), truth("shapes"));
    let mut other_prompt = executor.clone();
    other_prompt.prompt_tokens = 99;
    let cases: Vec<(Any, u32, &str)> = vec![
        (
            msg_reveal_output(&addr(TA), &id, &salt, &truth_hash),
            21,
            "submit scored",
        ),
        (
            msg_reveal_scored_output(&addr(TA), &id, &salt, &scores(1)),
            20,
            "do not open the output commitment",
        ),
        (
            msg_reveal_scored_output(&addr(TA), &id, &salt, &other_prompt),
            20,
            "do not open the output commitment",
        ),
        (
            msg_reveal_scored_output(&addr(TA), &id, &[0; 32], &executor),
            20,
            "do not open the output commitment",
        ),
    ];
    refused_in_one_block(&mut w, TA, &cases);
    assert_eq!(validation(&w, &id).status, "committed");
    let tx = w.tx(
        TA,
        vec![msg_reveal_scored_output(&addr(TA), &id, &salt, &executor)],
    );
    assert_ok(&w.block(vec![tx]), 0);
    assert_eq!(validation(&w, &id).status, "matched");
}

/// Sends each of `cases` (a message, the disputes code it is refused with and a fragment of
/// its log) as its own tx of `label` in one block and checks each refusal.
fn refused_in_one_block(w: &mut World, label: &str, cases: &[(Any, u32, &str)]) {
    let txs = cases
        .iter()
        .map(|(msg, _, _)| w.tx(label, vec![msg.clone()]))
        .collect();
    let block = w.block(txs);
    for (i, (_, code, fragment)) in cases.iter().enumerate() {
        assert_err(block.result(i), *code, fragment, fragment);
    }
}

#[test]
fn an_exact_model_refuses_scores() {
    let mut w = world(scenario_params());
    let rec = record("exact", true);
    let id = rec.inference_id.clone();
    settle(&mut w, std::slice::from_ref(&rec));
    let v = validation(&w, &id);
    let tx = w.tx_unsequenced(
        label_of(&v.validator),
        vec![msg_submit_validation(&v.validator, &id, &scores(0))],
    );
    let block = w.block(vec![tx]);
    assert_err(block.result(0), 21, "validated by exact answers", "scores");
    assert_eq!(validation(&w, &id).status, "pending");
}

// ---------------------------------------------------------------------------------------
// Sampling

/// The sampling rule, re-derived from the crate docs: `max − ⌊(max − min)·min(c, D)/D⌋`.
fn rule(params: &pb::Params, clean: u64) -> u64 {
    let span = params.max_sample_ppm - params.min_sample_ppm;
    params.max_sample_ppm - span * clean.min(params.decay_validations) / params.decay_validations
}

/// The validation-sampling seed of `height`, per the x/bls docs, on a chain without vote
/// extensions (each height's beacon comes from the hash of the block after it); checks the
/// beacon the chain recorded on the way.
fn sampling_seed(w: &World, height: u64, next_hash: &[u8; 32]) -> [u8; 32] {
    let beacon = w
        .query::<q::bls::Beacon>(gonka_proto::bls::QueryBeaconRequest { height })
        .beacon
        .unwrap();
    let value = Sha256::new()
        .chain_update(b"gonka/beacon-fallback/v1")
        .chain_update(next_hash)
        .finalize();
    assert_eq!(
        (beacon.source.as_str(), beacon.value.as_slice()),
        ("block_hash", &value[..])
    );
    let purpose = b"validation-sampling";
    Sha256::new()
        .chain_update(b"gonka/seed/v1")
        .chain_update((purpose.len() as u32).to_be_bytes())
        .chain_update(purpose)
        .chain_update(height.to_be_bytes())
        .chain_update(value)
        .finalize()
        .into()
}

/// Whether record `id` stored at a height with validation-sampling seed `height_seed` is
/// sampled at `rate`, per the crate docs.
fn expected_sampled(height_seed: &[u8; 32], id: &str, rate: u64) -> bool {
    let seed = Sha256::new()
        .chain_update(height_seed)
        .chain_update(id.as_bytes())
        .finalize();
    u64::from_be_bytes(seed[..8].try_into().unwrap()) % 1_000_000 < rate
}

/// Blocks of txs fed to a chain, with the app hash each produced.
type Log = Vec<(Vec<Vec<u8>>, Vec<u8>)>;

/// Commits a block of `txs` and logs it.
fn logged(w: &mut World, log: &mut Log, txs: Vec<Vec<u8>>) -> Block {
    let block = w.block(txs.clone());
    log.push((txs, block.response.app_hash.to_vec()));
    block
}

/// p1 submits a validation of record `id` in a logged block; asserts it is refused with
/// `(code, fragment)`.
fn assert_validation_refused(
    w: &mut World,
    log: &mut Log,
    id: &str,
    (code, fragment): (u32, &str),
    what: &str,
) {
    let validation = msg_submit_validation(&addr("p1"), id, &found([0; 32], (1, 1)));
    let tx = w.tx("p1", vec![validation]);
    let refused = logged(w, log, vec![tx]);
    assert_err(refused.result(0), code, fragment, what);
}

/// Whether leaf `index` of batch `batch_id`, settled at a height with validation-sampling
/// seed `height_seed`, is demanded at `rate`, per the x/settlement docs (one hash serves four
/// leaves).
fn expected_leaf(height_seed: &[u8; 32], batch_id: u64, index: u64, rate: u64) -> bool {
    let hash = Sha256::new()
        .chain_update(b"gonka/leaf-sample/v1")
        .chain_update(height_seed)
        .chain_update(batch_id.to_be_bytes())
        .chain_update((index / 4).to_be_bytes())
        .finalize();
    let at = 8 * (index % 4) as usize;
    u64::from_be_bytes(hash[at..at + 8].try_into().unwrap()) % 1_000_000 < rate
}

/// The chance (ppm) that a stored leaf, demanded at `leaf_rate`, is sampled for validation
/// when its executor's rate is `rate`, per the crate docs: `rate / leaf_rate` (floored), at
/// most certainty, so that the overall chance is the executor's rate.
fn given_leaf(rate: u64, leaf_rate: u64) -> u64 {
    (rate * 1_000_000 / leaf_rate).min(1_000_000)
}

/// Batch `number` of the TA over `records`, each paid tokens × `PRICE`, with its
/// `MsgSettleBatch` co-signed by every host of the batch.
fn committed(number: u64, records: &[WorkRecord]) -> (Batch, Any) {
    let served = records
        .iter()
        .map(|r| Served {
            record: r.clone(),
            host: addr(host_of(r)),
            cost: u128::from(r.prompt_tokens + r.completion_tokens) * PRICE,
            work_per_token: 0,
        })
        .collect();
    let batch = Batch::build(&addr(TA), number, served).unwrap();
    let signatures: Vec<_> = batch
        .hosts()
        .map(|host| cosign(&bls_key(label_of(host)), CHAIN_ID, &batch.msg))
        .collect();
    let msg = msg_settle_batch(&batch.signed(&signatures));
    (batch, msg)
}

/// What a phase drew, per node: the ids of its stored records (the leaves the chain
/// demanded) and of those sampled for validation.
struct Drawn {
    stored: BTreeMap<u8, Vec<String>>,
    sampled: BTreeMap<u8, Vec<String>>,
}

/// Settles `count` cheap records on each node of `plan` (`(node, count, expected rate)`) as
/// committed batches of the TA, the nodes mixed (in inference-id order), 500 per block in
/// batches of 100 co-signed by their hosts, and checks both draws that make a validation:
/// the leaves the next block demands (the exact set, recomputed here from the hash of the
/// block after the settling one, at each batch's rate: the highest expected rate of its
/// hosts, which `leaf_sample_ppm` (100%) does not cap) and, once the TA has provided them in the block after, the records the next block
/// samples (the exact set, recomputed from the hash of the block after the providing one, at
/// each executor's expected rate divided by its leaf's rate). Notes each record's nonce in
/// `nonces`; returns what was drawn.
fn phase(
    w: &mut World,
    log: &mut Log,
    tag: &str,
    plan: &[(u8, usize, u64)],
    nonces: &mut BTreeMap<String, String>,
) -> Drawn {
    let mut records = Vec::new();
    let mut rate_of: BTreeMap<String, (u8, u64)> = BTreeMap::new();
    for (node, count, rate) in plan {
        for i in 0..*count {
            let nonce = format!("{tag}-n{node}-{i}");
            let record = record_on(*node, &nonce, true, (1, 1));
            nonces.insert(record.inference_id.clone(), nonce.clone());
            rate_of.insert(record.inference_id.clone(), (*node, *rate));
            records.push(record);
        }
    }
    records.sort_by(|a, b| a.inference_id.cmp(&b.inference_id));
    let per_node =
        || -> BTreeMap<u8, Vec<String>> { plan.iter().map(|(n, _, _)| (*n, Vec::new())).collect() };
    let mut drawn = Drawn {
        stored: per_node(),
        sampled: per_node(),
    };
    for (part, in_block) in records.chunks(500).enumerate() {
        let last = w
            .query::<q::settlement::BatchNumber>(spb::QueryBatchNumberRequest {
                transfer_agent: addr(TA),
            })
            .number;
        let (batches, msgs): (Vec<Batch>, Vec<Any>) = in_block
            .chunks(100)
            .zip(last + 1..)
            .map(|(chunk, number)| committed(number, chunk))
            .unzip();
        let txs = msgs.into_iter().map(|msg| w.tx(TA, vec![msg])).collect();
        let settled = logged(w, log, txs);
        let ids: Vec<u64> = (0..batches.len())
            .map(|i| {
                assert_ok(&settled, i);
                settled.tx_events(i, "batch_settled")[0]["batch_id"]
                    .parse()
                    .unwrap()
            })
            .collect();
        let settled_height = w.chain.height();
        let next_hash = w.chain.block_hash(settled_height + 1);
        logged(w, log, vec![]);
        let leaf_seed = sampling_seed(w, settled_height, &next_hash);
        // inference id -> the rate its leaf was demanded at
        let mut leaf_rate: BTreeMap<String, u64> = BTreeMap::new();
        let mut provide = Vec::new();
        for (batch, &id) in batches.iter().zip(&ids) {
            let id_of = |index: u64| {
                batch.leaves[index as usize]
                    .record
                    .as_ref()
                    .unwrap()
                    .inference_id
                    .clone()
            };
            let count = batch.leaves.len() as u64;
            let rate = (0..count).map(|i| rate_of[&id_of(i)].1).max().unwrap();
            let want: Vec<(u64, u64)> = (0..count)
                .filter(|&i| expected_leaf(&leaf_seed, id, i, rate))
                .map(|i| (i, rate))
                .collect();
            let got: Vec<(u64, u64)> = w
                .query::<q::settlement::Demands>(spb::QueryDemandsRequest {
                    transfer_agent: addr(TA),
                    start_batch_id: id,
                    ..Default::default()
                })
                .demands
                .into_iter()
                .filter(|d| d.batch_id == id)
                .map(|d| (d.index, d.sampled_ppm))
                .collect();
            assert_eq!(
                got, want,
                "leaves demanded of {tag} block {part}, batch {id}"
            );
            for (index, rate) in want {
                leaf_rate.insert(id_of(index), rate);
                provide.push(msg_provide_leaf(
                    &addr(TA),
                    id,
                    batch.leaf_proof(index).unwrap(),
                ));
            }
        }
        let txs: Vec<Vec<u8>> = provide
            .chunks(16)
            .map(|msgs| w.tx(TA, msgs.to_vec()))
            .collect();
        let count = txs.len();
        let provided = logged(w, log, txs);
        for i in 0..count {
            assert_ok(&provided, i);
        }
        let stored_height = w.chain.height();
        let next_hash = w.chain.block_hash(stored_height + 1);
        let sampling = logged(w, log, vec![]);
        let height_seed = sampling_seed(w, stored_height, &next_hash);
        let events = sampling.events("validation_sampled");
        for event in &events {
            let (_, rate) = rate_of[&event["inference_id"]];
            assert_eq!(event["rate_ppm"], rate.to_string());
        }
        let got: BTreeSet<String> = events.iter().map(|e| e["inference_id"].clone()).collect();
        let want: BTreeSet<String> = leaf_rate
            .iter()
            .filter(|(id, leaf)| {
                expected_sampled(&height_seed, id, given_leaf(rate_of[*id].1, **leaf))
            })
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(got, want, "sampled records of {tag} block {part}");
        for id in leaf_rate.into_keys() {
            let node = rate_of[&id].0;
            if got.contains(&id) {
                drawn.sampled.get_mut(&node).unwrap().push(id.clone());
            }
            drawn.stored.get_mut(&node).unwrap().push(id);
        }
    }
    drawn
}

/// Runs the sampling scenario on `w`, logging every block; returns what phase 1 (p0 new)
/// and phase 2 (p0 after clean records, p1 new) drew.
fn sampling_scenario(w: &mut World, log: &mut Log) -> (Drawn, Drawn) {
    let params = sampling_params();
    // Phase 1: a new executor is checked at the maximum, 10%: a tenth of its leaves are
    // demanded and every one of them is validated.
    let mut nonces: BTreeMap<String, String> = BTreeMap::new();
    let first = phase(
        w,
        log,
        "new",
        &[(0, 1_000, params.max_sample_ppm)],
        &mut nonces,
    );
    assert_eq!(first.sampled[&0], first.stored[&0]);
    assert_eq!(stats(w, "p0").current_rate_ppm, params.max_sample_ppm);
    // The stored records of n0 are exactly the leaves phase 1 provided.
    let stored: BTreeSet<String> = w
        .query_all::<q::inference::Records>(gonka_proto::inference::QueryRecordsRequest {
            epoch: 0,
            executor: "n0".into(),
            ..Default::default()
        })
        .into_iter()
        .map(|r| r.record.unwrap().inference_id)
        .collect();
    assert_eq!(stored, first.stored[&0].iter().cloned().collect());
    // A committed record whose leaf was not drawn is no work record: nobody validates it.
    let unstored = nonces
        .keys()
        .find(|id| !stored.contains(*id))
        .unwrap()
        .clone();
    assert_validation_refused(
        w,
        log,
        &unstored,
        (8, "no work record"),
        "record never stored",
    );

    // Answer every validation honestly, five per block, each block's outputs revealed by
    // the TA after the commits: the rate decays by the rule.
    let mut answered = 0;
    for chunk in first.sampled[&0].chunks(5) {
        let mut txs: Vec<Vec<u8>> = chunk
            .iter()
            .map(|id| {
                let v = validation(w, id);
                w.tx(
                    label_of(&v.validator),
                    vec![msg_submit_validation(
                        &v.validator,
                        id,
                        &found(truth(&nonces[id]), (1, 1)),
                    )],
                )
            })
            .collect();
        let reveals = chunk
            .iter()
            .map(|id| {
                let nonce = &nonces[id];
                msg_reveal_output(&addr(TA), id, &salt(nonce), &truth(nonce))
            })
            .collect();
        txs.push(w.tx(TA, reveals));
        let answers = logged(w, log, txs);
        for i in 0..=chunk.len() {
            assert_ok(&answers, i);
        }
        answered += chunk.len() as u64;
        let s = stats(w, "p0");
        assert_eq!(s.executor.unwrap().clean_streak, answered);
        assert_eq!(
            s.current_rate_ppm,
            rule(&params, answered),
            "after {answered}"
        );
    }
    assert!(answered >= params.decay_validations);

    // Phase 2: the clean executor is checked at the minimum, 1%, while a new one (p1, on
    // n1) is checked at the maximum in the same batches: their leaves are demanded at 10%,
    // p1's all validated, p0's a tenth of them.
    let second = phase(
        w,
        log,
        "clean",
        &[
            (0, 1_000, params.min_sample_ppm),
            (1, 500, params.max_sample_ppm),
        ],
        &mut nonces,
    );
    assert_eq!(second.sampled[&1], second.stored[&1]);
    // A stored record that was not sampled cannot be validated.
    let unsampled = second.stored[&0]
        .iter()
        .find(|id| !second.sampled[&0].contains(id))
        .unwrap()
        .clone();
    assert_validation_refused(
        w,
        log,
        &unsampled,
        (4, "was not sampled"),
        "unsampled record",
    );
    (first, second)
}

fn sampling_params() -> pb::Params {
    pb::Params {
        validation_deadline_blocks: 1_000,
        jail_after_misses: 1_000,
        ..gonka_disputes::default_params()
    }
}

/// The scenario world plus node n1 of host p1, whose BLS key is registered.
fn sampling_world() -> World {
    let mut w = world(sampling_params());
    let tx = w.tx(
        "p1",
        vec![msg_register_node(&addr("p1"), &spec(1)), register_bls("p1")],
    );
    assert_ok(&w.block(vec![tx]), 0);
    w
}

#[test]
fn sampling_follows_the_adaptive_rule_and_two_chains_agree() {
    let mut log = Vec::new();
    let mut a = sampling_world();
    let (phase1, phase2) = sampling_scenario(&mut a, &mut log);
    let (first, second, new) = (
        &phase1.sampled[&0],
        &phase2.sampled[&0],
        &phase2.sampled[&1],
    );
    // Binomial tolerances (4σ) on the overall rate (the leaf's chance times the record's):
    // 1,000 records at 10% → 100 ± 38; at 1% → 10 ± 13; 500 at 10% → 50 ± 27.
    assert!((62..=138).contains(&first.len()), "p0 new: {}", first.len());
    assert!(second.len() <= 23, "p0 clean: {}", second.len());
    assert!((23..=77).contains(&new.len()), "p1 new: {}", new.len());
    eprintln!(
        "sampled: p0 new {}/1000, p0 clean {}/1000 ({} stored), p1 new {}/500",
        first.len(),
        second.len(),
        phase2.stored[&0].len(),
        new.len()
    );
    // An executor's records are the stored ones: the leaves the chain demanded.
    let stats_a = stats(&a, "p0").executor.unwrap();
    assert_eq!(
        stats_a.records,
        (phase1.stored[&0].len() + phase2.stored[&0].len()) as u64
    );
    assert_eq!(stats_a.sampled, (first.len() + second.len()) as u64);
    let p1 = stats(&a, "p1");
    assert_eq!(p1.executor.unwrap().records, phase2.stored[&1].len() as u64);
    assert_eq!(p1.current_rate_ppm, sampling_params().max_sample_ppm);

    // A second chain fed the same blocks makes the same choices, block by block.
    let mut b = sampling_world();
    for (i, (txs, app_hash)) in log.into_iter().enumerate() {
        let block = b.block(txs);
        assert_eq!(
            block.response.app_hash.to_vec(),
            app_hash,
            "block {i} differs"
        );
    }
    assert_eq!(stats(&b, "p0").executor.unwrap(), stats_a);
}

/// A validator that sits out its epoch's key generation (no dealing by the deadline) still
/// validates but is not paid for it that epoch; one that dealt is.
#[test]
fn a_validator_that_skips_key_generation_forfeits_its_validation_rewards() {
    let mut w = world(scenario_params());
    // p0 registered its BLS key (it co-signs its batches); the others register theirs.
    let keys: Vec<Vec<u8>> = ["p1", "p2", "p3", "p4", "p5"]
        .into_iter()
        .map(|label| w.tx(label, vec![register_bls(label)]))
        .collect();
    assert!(w
        .block(keys)
        .response
        .tx_results
        .iter()
        .all(|r| r.code == 0));
    // Epoch 0 ends; round 1 starts among the six. Only p1 and p2 deal.
    let round = loop {
        let answer = w.chain.query(
            <gonka_proto::query::bls::Dkg as gonka_proto::query::Query>::PATH,
            prost::Message::encode_to_vec(&gonka_proto::bls::QueryDkgRequest { round: 1 }),
        );
        if answer.code == 0 {
            let response: gonka_proto::bls::QueryDkgResponse =
                prost::Message::decode(answer.value.as_ref()).unwrap();
            break response.round.unwrap();
        }
        w.block(vec![]);
    };
    let dealers = ["p1", "p2"];
    let deals = dealers
        .iter()
        .enumerate()
        .map(|(i, label)| {
            let poly = gonka_bls_crypto::threshold::Polynomial::from_seed(
                round.threshold as usize,
                &[i as u8],
            );
            let ephemeral = gonka_bls_crypto::dkg::Ephemeral::from_seed(&[i as u8 + 9; 32]);
            let msg =
                gonka_client::bls::msg_dkg_deal(CHAIN_ID, &round, &addr(label), &poly, &ephemeral)
                    .unwrap();
            w.tx(label, vec![msg])
        })
        .collect();
    w.block(deals);
    while w.chain.height() <= round.deal_deadline {
        w.block(vec![]);
    }
    // Honest records, each validated by whoever the beacon picks.
    let (mut paid, mut forfeited) = (0, 0);
    for n in 0..12 {
        let (id, label, block) = validate(
            &mut w,
            record(&format!("dkg-{n}"), true),
            &answer(truth(&format!("dkg-{n}"))),
        );
        let v = validation(&w, &id);
        assert_eq!(v.status, "matched");
        if dealers.contains(&label) {
            assert!(v.reward.parse::<u128>().unwrap() > 0, "{label} dealt");
            paid += 1;
        } else {
            assert_eq!(v.reward, "0", "{label} sat out");
            assert_eq!(
                tx_events(block.result(0), "validation_reward_forfeited")[0]["validator"],
                addr(label)
            );
            forfeited += 1;
        }
        if paid > 0 && forfeited > 0 {
            return;
        }
    }
    panic!(
        "twelve validations drew no dealer and no non-dealer ({paid} paid, {forfeited} forfeited)"
    );
}

/// A world where the record of `nonce` (honest or not), unsampled, was disputed by its
/// requester and its committee drawn; with the record and the committee's labels.
fn disputed_with_committee(nonce: &str, honest: bool) -> (World, WorkRecord, Vec<&'static str>) {
    let mut w = world(unsampled_params());
    let rec = record(nonce, honest);
    dispute_unsampled(&mut w, &rec, MIN_DEPOSIT);
    let members = drawn(&mut w, 0)
        .committee
        .iter()
        .map(|m| label_of(m))
        .collect();
    (w, rec, members)
}

/// A majority of `members` votes the true answer of `nonce` on dispute 0, one block each;
/// returns the gas each vote used.
fn majority_votes(w: &mut World, members: &[&str], nonce: &str) -> Vec<i64> {
    members
        .iter()
        .take(members.len() / 2 + 1)
        .map(|m| {
            let vote = msg_vote_dispute(&addr(m), 0, &answer(truth(nonce)));
            let tx = w.tx(m, vec![vote]);
            let block = w.block(vec![tx]);
            assert_ok(&block, 0);
            block.result(0).gas_used
        })
        .collect()
}

/// The vote or reveal that decides a dispute settles it, and which one lands last depends on
/// the block's order: each pays the flat price of deciding, so the gas a sender's simulation
/// estimated (before the other landed) still covers it. On the old chain the deciding reveal
/// used 2.4× (upheld) to 4.3× (faulted) the gas it was simulated with, ran out of gas on
/// recheck and was dropped from every mempool, and its honest TA was slashed for withholding
/// the output (seen on a CI localnet).
#[test]
fn the_gas_of_a_vote_or_reveal_does_not_depend_on_whether_it_decides_the_dispute() {
    for honest in [true, false] {
        let mut used = Vec::new();
        for votes_first in [false, true] {
            let (mut w, rec, members) = disputed_with_committee("order", honest);
            let mut reveal_gas = 0;
            if !votes_first {
                reveal_gas = reveal(&mut w, &rec).result(0).gas_used;
            }
            let votes_gas = majority_votes(&mut w, &members, "order");
            if votes_first {
                reveal_gas = reveal(&mut w, &rec).result(0).gas_used;
            }
            let outcome = if honest {
                "executor_upheld"
            } else {
                "executor_faulted"
            };
            assert_eq!(dispute(&w, 0).status, outcome);
            used.push((reveal_gas, votes_gas));
        }
        // Only the bytes of the votes read differ (how many, and their judged flags): well
        // inside the 30% a simulated estimate is raised by.
        let close = |a: i64, b: i64| (a - b).abs() * 100 < b;
        let ((reveal_first, votes_after), (reveal_last, votes_before)) = (&used[0], &used[1]);
        assert!(
            close(*reveal_first, *reveal_last),
            "honest={honest}: {used:?}"
        );
        for (after, before) in votes_after.iter().zip(votes_before) {
            assert!(close(*after, *before), "honest={honest}: {used:?}");
        }
    }
}

/// Stuffing blocks (a full block costs about 0.002 GNK) cannot push a duty past its
/// deadline: the transfer agent's reveal arrives behind a mempool of bank sends far larger
/// than the block, and the proposer still puts it first, with the TA's own send that came
/// before it (whose sequence it follows). On the old chain the proposal was the mempool's
/// order: the sends filled the block and the reveal waited, block after block, until the
/// dispute settled as withheld against the TA.
#[test]
fn a_reveal_sent_behind_a_stuffed_mempool_lands_first_with_the_tx_its_sender_sent_before() {
    use gonka_client::msg_send;
    use tendermint_abci::Application;
    use tendermint_proto::v0_38::abci::RequestPrepareProposal;

    let (mut w, rec, members) = disputed_with_committee("stuffed", true);
    majority_votes(&mut w, &members, "stuffed");
    assert_eq!(dispute(&w, 0).status, "open", "waiting for the reveal");

    let stuffing: Vec<Vec<u8>> = (0..200)
        .map(|_| w.tx("alice", vec![msg_send(&addr("alice"), &addr("bob"), 1)]))
        .collect();
    let ta_send = w.tx(TA, vec![msg_send(&addr(TA), &addr("bob"), 1)]);
    let reveal_tx = w.tx(TA, vec![reveal_msg(TA, &rec)]);
    for tx in [&ta_send, &reveal_tx] {
        let checked = w.chain.check_tx(tx.clone());
        assert_eq!(checked.code, 0, "{}", checked.log);
    }
    // The mempool's order: the stuffing, then the TA's send and its reveal; room for ten
    // sends.
    let mut mempool = stuffing.clone();
    mempool.extend([ta_send.clone(), reveal_tx.clone()]);
    let block_bytes = 10 * stuffing[0].len() as i64;
    let proposal: Vec<Vec<u8>> = Application::prepare_proposal(
        w.chain.app(),
        RequestPrepareProposal {
            max_tx_bytes: block_bytes,
            txs: mempool.into_iter().map(Into::into).collect(),
            height: w.chain.height() as i64 + 1,
            ..Default::default()
        },
    )
    .txs
    .into_iter()
    .map(|t| t.to_vec())
    .collect();
    let at = |tx: &Vec<u8>| proposal.iter().position(|t| t == tx);
    assert_eq!(
        (at(&ta_send), at(&reveal_tx)),
        (Some(0), Some(1)),
        "the duty first, after its sender's earlier tx"
    );
    assert!(proposal.len() > 2, "the rest of the block is the mempool's");
    let block = w.block(proposal);
    assert_ok(&block, 0);
    assert_ok(&block, 1);
    assert_eq!(dispute(&w, 0).status, "executor_upheld");
}
