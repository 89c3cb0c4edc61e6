//! x/settlement through the ABCI harness: escrows (open, top up, close, release), committed
//! batches paid exactly after their challenge window, every refusal of a bad batch changing
//! nothing, and every challenge kind winning against a cheating transfer agent (batch voided,
//! requesters refunded, cheats slashed to the challenger) and failing against an honest one.
//!
//! Every block goes through `World::block`, which checks that balances sum to the supply and
//! that the supply does not change outside epoch ends.

mod common;
mod support;

use gonka_client::settlement::{
    cosign, msg_challenge_batch, msg_close_escrow, msg_demand_leaf, msg_open_escrow,
    msg_provide_leaf, msg_settle_batch, msg_top_up_escrow, Batch, Served,
};
use gonka_proto::batch::leaf_node;
use gonka_proto::query::settlement as qs;
use gonka_proto::settlement::msg_challenge_batch::Kind;
use gonka_proto::settlement::{
    self as pb, BatchStatus, DuplicateLeaf, HostMismatch, MsgSettleBatch, RequesterMismatch,
    SumMismatch, UnsortedLeaves,
};
use support::*;
use tendermint_proto::v0_38::abci::ExecTxResult;

const MODEL: &str = "bench/model";
const PRICE: u128 = 2;
/// A model of SmolLM2-135M's weight (its `work_per_token`), at the same price.
const LARGE: &str = "bench/large";
const LARGE_WORK_PER_TOKEN: u64 = gonka_client::chat::LLM_WORK_PER_TOKEN;
/// x/inference's `max_tokens_per_record` here.
const MAX_TOKENS: u64 = 10_000;
const TA: &str = "p2";
const WINDOW: u64 = 10;
/// Blocks to answer a leaf demand.
const ANSWER: u64 = 4;
const ESCROW: u128 = 1_000_000;
const COMMISSION: u128 = 3;
const N0: Exec<'static> = exec("p0", "n0", 10);
const N1: Exec<'static> = exec("p1", "n1", 11);

/// Seconds a request may be from its batch's block time in these tests: the test requests
/// are signed at a fixed time (2023) long before the harness's blocks (2026).
const MAX_AGE: u64 = 100_000_000;

/// p0 (node n0) and p1 (node n1) host, p2 is the transfer agent, alice and bob each hold an
/// escrow of [`ESCROW`] for it; the hosts have BLS keys. Epochs never end.
fn world() -> World {
    world_keeping(2 * MAX_AGE)
}

/// [`world`] keeping final batches `keep` seconds.
fn world_keeping(keep: u64) -> World {
    world_with(keep, 0)
}

/// [`world`] sampling each leaf of a settled batch with chance `ppm`: x/disputes samples
/// every executor at `ppm` and the ceiling is certainty (the other tests sample none, so
/// that only what they do moves the batches).
fn world_sampling(ppm: u64) -> World {
    world_with(2 * MAX_AGE, ppm)
}

/// [`world`] keeping final batches `keep` seconds and sampling leaves at `sample_ppm`.
fn world_with(keep: u64, sample_ppm: u64) -> World {
    let mut setup = Setup::new(3, 1_000_000);
    setup.epoch_length = 100_000;
    world_of(setup, keep, sample_ppm)
}

/// [`world_sampling`] at certainty on a chain whose beacon a BLS group of p0..p2 signs: a key
/// generation round starts in an epoch's last block, so epochs last 5 blocks (unbonding 200
/// epochs, to outlast the challenge window) and the round's phases 4; vote extensions are
/// on. [`World::block`] then commits blocks whose
/// beacon the group did not sign, [`World::signed_block`] blocks whose beacon it did.
fn world_grouped() -> (World, Group) {
    let mut setup = Setup::new(3, 1_000_000);
    setup.epoch_length = 5;
    setup.stake.unbonding_epochs = 200;
    setup.vote_extensions_from = 1;
    let mut world = world_of(setup, 2 * MAX_AGE, 1_000_000);
    let group = world.form_group(3);
    (world, group)
}

/// The settlement world of `setup`, keeping final batches `keep` seconds and sampling
/// leaves at `sample_ppm`.
fn world_of(setup: Setup, keep: u64, sample_ppm: u64) -> World {
    let mut world = World::with_genesis(setup, |state| {
        state["bls"] = serde_json::json!({"params": {"dkg_slots": 12, "dkg_deal_blocks": 2,
            "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1, "beacon_keep_blocks": 1000}});
        state["inference"] = serde_json::json!({
            "params": {"max_tokens_per_record": MAX_TOKENS, "payload_retention_blocks": 1000},
            "models": [
                {"id": MODEL, "price_per_token": PRICE.to_string(), "min_vram_mib": 0},
                {"id": LARGE, "price_per_token": PRICE.to_string(), "min_vram_mib": 0,
                 "work_per_token": LARGE_WORK_PER_TOKEN},
            ],
        });
        let params = &mut state["settlement"]["params"];
        params["challenge_window_blocks"] = WINDOW.into();
        params["leaf_answer_blocks"] = ANSWER.into();
        params["max_record_age_secs"] = MAX_AGE.min(keep / 2).into();
        params["batch_keep_secs"] = keep.into();
        params["leaf_sample_ppm"] = if sample_ppm > 0 { 1_000_000 } else { 0 }.into();
        let disputes = gonka_proto::disputes::Params {
            min_sample_ppm: sample_ppm,
            max_sample_ppm: sample_ppm,
            ..gonka_disputes::default_params()
        };
        state["disputes"] = serde_json::json!({ "params": disputes });
    });
    let mut txs = vec![world.tx(TA, vec![register_ta(TA, "https://ta.example")])];
    for (host, node, seed) in [("p0", "n0", 10), ("p1", "n1", 11)] {
        txs.push(world.tx(
            host,
            vec![
                gonka_client::msg_register_node(
                    &addr(host),
                    &node_spec(host, node, &[MODEL, LARGE], 0, seed),
                ),
                register_bls(host),
            ],
        ));
    }
    let block = world.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    let txs = ["alice", "bob"]
        .map(|r| world.tx(r, vec![msg_open_escrow(&addr(r), &addr(TA), ESCROW, 1_000)]))
        .to_vec();
    let block = world.block(txs);
    assert!(
        block.response.tx_results.iter().all(|r| r.code == 0),
        "{:?}",
        block.response.tx_results
    );
    world
}

/// Request `nonce` of `requester` executed on `on` with `tokens`.
fn served(requester: &str, nonce: &str, on: Exec<'_>, tokens: (u64, u64)) -> Served {
    Served {
        record: work_record(requester, TA, nonce, MODEL, on, tokens, COMMISSION),
        host: addr(on.host),
        cost: u128::from(tokens.0 + tokens.1) * PRICE,
        work_per_token: 0,
    }
}

/// Five records: alice three (two on n0), bob two.
fn honest(number: u64) -> Batch {
    let records = vec![
        served("alice", &format!("a1-{number}"), N0, (10, 20)),
        served("alice", &format!("a2-{number}"), N1, (5, 5)),
        served("alice", &format!("a3-{number}"), N0, (1, 2)),
        served("bob", &format!("b1-{number}"), N1, (7, 3)),
        served("bob", &format!("b2-{number}"), N0, (4, 4)),
    ];
    Batch::build(&addr(TA), number, records).unwrap()
}

/// The served requests `leaves` commit to.
fn served_of(leaves: &[gonka_proto::settlement::BatchLeaf]) -> Vec<Served> {
    leaves.iter().map(|l| Served::of_leaf(l).unwrap()).collect()
}

/// `msg` co-signed by every host it names.
fn signed(msg: &MsgSettleBatch) -> MsgSettleBatch {
    let signatures: Vec<_> = msg
        .hosts
        .iter()
        .map(|h| {
            let label = if h.host == addr("p0") { "p0" } else { "p1" };
            cosign(&bls_key(label), CHAIN_ID, msg)
        })
        .collect();
    MsgSettleBatch {
        host_signature: gonka_bls_crypto::aggregate(&signatures).to_bytes().to_vec(),
        ..msg.clone()
    }
}

fn settle(world: &mut World, msg: &MsgSettleBatch) -> ExecTxResult {
    let tx = world.tx(TA, vec![msg_settle_batch(&signed(msg))]);
    world.block(vec![tx]).result(0).clone()
}

fn challenge(world: &mut World, challenger: &str, batch_id: u64, kind: Kind) -> ExecTxResult {
    let tx = world.tx(
        challenger,
        vec![msg_challenge_batch(&addr(challenger), batch_id, kind)],
    );
    world.block(vec![tx]).result(0).clone()
}

fn escrow(world: &World, requester: &str) -> u128 {
    world.escrow(requester, TA)
}

fn batch(world: &World, id: u64) -> pb::Batch {
    world
        .query::<qs::Batch>(pb::QueryBatchRequest {
            id,
            ..Default::default()
        })
        .batch
        .unwrap()
}

fn line(batch: &Batch, requester: &str) -> u128 {
    let address = addr(requester);
    batch
        .msg
        .requesters
        .iter()
        .find(|l| l.requester == address)
        .map_or(0, |l| l.amount.parse().unwrap())
}

/// Index of the first and last leaf of `requester` in `batch`.
fn leaf_range(batch: &Batch, requester: &str) -> (u64, u64) {
    let address = addr(requester);
    let of =
        |l: &gonka_proto::settlement::BatchLeaf| l.record.as_ref().unwrap().requester == address;
    let first = batch.leaves.iter().position(of).unwrap() as u64;
    let last = batch.leaves.iter().rposition(of).unwrap() as u64;
    (first, last)
}

/// `requester`'s line in `msg`.
fn line_mut<'a>(msg: &'a mut MsgSettleBatch, requester: &str) -> &'a mut pb::RequesterTotal {
    let address = addr(requester);
    msg.requesters
        .iter_mut()
        .find(|l| l.requester == address)
        .unwrap()
}

fn assert_code(result: &ExecTxResult, code: u32, what: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("settlement", code),
        "{what}: {}",
        result.log
    );
}

fn wait(world: &mut World, blocks: u64) {
    for _ in 0..blocks {
        world.block(vec![]);
    }
}

#[test]
fn an_honest_batch_debits_escrows_at_once_and_pays_after_the_window() {
    let mut world = world();
    let batch0 = honest(1);
    // Costs: alice 60 + 20 + 6, bob 20 + 16; commission 3 per record.
    assert_eq!(line(&batch0, "alice"), 86 + 3 * COMMISSION);
    assert_eq!(line(&batch0, "bob"), 36 + 2 * COMMISSION);
    let (p0, p1, ta) = (
        world.balance_of("p0"),
        world.balance_of("p1"),
        world.balance_of(TA),
    );
    let result = settle(&mut world, &batch0.msg);
    assert_eq!(result.code, 0, "{}", result.log);
    let settled_at = world.chain.height();
    assert_eq!(escrow(&world, "alice"), ESCROW - 95);
    assert_eq!(escrow(&world, "bob"), ESCROW - 42);
    let stored = batch(&world, 1);
    assert_eq!(stored.status, BatchStatus::Pending as i32);
    assert_eq!(stored.final_at, settled_at + WINDOW);
    assert!(stored.settled.unwrap().host_signature.is_empty());
    // Nobody is paid or credited inside the window.
    wait(&mut world, WINDOW - 1);
    assert_eq!(world.balance_of("p0"), p0);
    assert!(world.work(0).is_empty());
    // The block at final_at pays: p0 ran 30 + 3 + 8 tokens, p1 10 + 10.
    wait(&mut world, 1);
    assert_eq!(batch(&world, 1).status, BatchStatus::Final as i32);
    assert_eq!(world.balance_of("p0"), p0 + 82);
    assert_eq!(world.balance_of("p1"), p1 + 40);
    assert_eq!(world.balance_of(TA), ta - FEE + 5 * COMMISSION);
    let mut work = world.work(0);
    work.sort();
    let mut expected = vec![(addr("p0"), 41), (addr("p1"), 20)];
    expected.sort();
    assert_eq!(work, expected);
    let pool = gonka_settlement::pool_address();
    assert_eq!(world.balance(&pool), 2 * ESCROW - 95 - 42);

    // The same batch again, or its number reused, is refused and changes nothing.
    let result = settle(&mut world, &batch0.msg);
    assert_code(&result, 7, "replayed batch");
    assert_eq!(escrow(&world, "alice"), ESCROW - 95);
    // The next number settles, and the chain says which was the last.
    let result = settle(&mut world, &honest(2).msg);
    assert_eq!(result.code, 0, "{}", result.log);
    let number = world.query::<qs::BatchNumber>(pb::QueryBatchNumberRequest {
        transfer_agent: addr(TA),
    });
    assert_eq!(number.number, 2);
}

#[test]
fn escrows_top_up_close_and_release_after_a_window() {
    let mut world = world();
    let alice = world.balance_of("alice");
    let txs = vec![
        world.tx(
            "alice",
            vec![msg_top_up_escrow(&addr("alice"), &addr(TA), 500, 2_000)],
        ),
        // Bob cannot shorten his expiry by a top-up, nor open a second escrow.
        world.tx(
            "bob",
            vec![msg_top_up_escrow(&addr("bob"), &addr(TA), 1, 10)],
        ),
    ];
    let block = world.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_code(block.result(1), 3, "earlier expiry");
    let tx = world.tx(
        "bob",
        vec![msg_open_escrow(&addr("bob"), &addr(TA), 5, 2_000)],
    );
    assert_code(world.block(vec![tx]).result(0), 4, "second escrow");
    assert_eq!(escrow(&world, "alice"), ESCROW + 500);
    assert_eq!(world.balance_of("alice"), alice - FEE - 500);

    // Closing: batches still debit it for a window, then the rest comes back.
    let tx = world.tx("alice", vec![msg_close_escrow(&addr("alice"), &addr(TA))]);
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    let closed_at = world.chain.height();
    let result = settle(&mut world, &honest(1).msg);
    assert_eq!(
        result.code, 0,
        "a closing escrow still pays: {}",
        result.log
    );
    let left = ESCROW + 500 - 95;
    assert_eq!(escrow(&world, "alice"), left);
    let tx = world.tx(
        "alice",
        vec![msg_top_up_escrow(&addr("alice"), &addr(TA), 1, 0)],
    );
    assert_code(
        world.block(vec![tx]).result(0),
        3,
        "top-up of a closing escrow",
    );
    let now = world.chain.height();
    wait(&mut world, closed_at + WINDOW - now);
    let response = world.query_raw::<qs::Escrow>(pb::QueryEscrowRequest {
        requester: addr("alice"),
        transfer_agent: addr(TA),
    });
    assert_eq!(
        (response.codespace.as_str(), response.code),
        ("settlement", 5)
    );
    assert_eq!(world.balance_of("alice"), alice - 3 * FEE - 500 + left);
    // A batch debiting the released escrow is refused.
    let result = settle(&mut world, &honest(2).msg);
    assert_code(&result, 10, "released escrow");
}

/// A change to a batch message.
type Edit = Box<dyn Fn(&mut MsgSettleBatch)>;

#[test]
fn bad_batches_are_refused_whole_and_change_nothing() {
    let mut world = world();
    let batch0 = honest(1);
    let before = (escrow(&world, "alice"), escrow(&world, "bob"));
    let cases: Vec<(&str, u32, Edit)> = vec![
        (
            "a total the lines do not add up to",
            6,
            Box::new(|m| m.total = "1".into()),
        ),
        (
            "unsorted requester lines",
            6,
            Box::new(|m| m.requesters.reverse()),
        ),
        (
            "a payout above the total",
            6,
            Box::new(|m| m.hosts[0].payout = "100000".into()),
        ),
        (
            "a last index outside the batch",
            6,
            Box::new(|m| m.hosts[0].last_index = 5),
        ),
        ("a wrong number", 7, Box::new(|m| m.number = 2)),
    ];
    for (what, code, edit) in cases {
        let mut msg = batch0.msg.clone();
        edit(&mut msg);
        let tx = if code == 6 {
            world.tx_unsequenced(TA, vec![msg_settle_batch(&signed(&msg))])
        } else {
            world.tx(TA, vec![msg_settle_batch(&signed(&msg))])
        };
        assert_code(world.block(vec![tx]).result(0), code, what);
    }
    // One host's signature missing from the aggregate.
    let only_p0 = cosign(&bls_key("p0"), CHAIN_ID, &batch0.msg);
    let msg = batch0.signed(&[only_p0]);
    let tx = world.tx(TA, vec![msg_settle_batch(&msg)]);
    assert_code(world.block(vec![tx]).result(0), 9, "missing host signature");
    // Signed, then a line changed: the hosts did not sign that.
    let mut msg = signed(&batch0.msg);
    let payout: u128 = msg.hosts[0].payout.parse().unwrap();
    msg.hosts[0].payout = (payout - 1).to_string();
    let tx = world.tx(TA, vec![msg_settle_batch(&msg)]);
    assert_code(
        world.block(vec![tx]).result(0),
        9,
        "line changed after signing",
    );
    // A requester without escrow; an escrow too small.
    let carol = Batch::build(&addr(TA), 1, vec![served("carol", "c1", N0, (1, 1))]).unwrap();
    assert_code(&settle(&mut world, &carol.msg), 10, "no escrow");
    let big = Batch::build(
        &addr(TA),
        1,
        vec![served("bob", "b9", N0, (300_000, 300_000))],
    )
    .unwrap();
    assert_code(&settle(&mut world, &big.msg), 10, "escrow too small");
    // Not a transfer agent.
    let tx = world.tx(
        "alice",
        vec![msg_settle_batch(&signed(
            &Batch::build(&addr("alice"), 1, vec![served("bob", "x", N0, (1, 1))])
                .unwrap()
                .msg,
        ))],
    );
    assert_code(world.block(vec![tx]).result(0), 15, "not a transfer agent");
    assert_eq!((escrow(&world, "alice"), escrow(&world, "bob")), before);
    let response = world.query_raw::<qs::Batch>(pb::QueryBatchRequest {
        id: 1,
        ..Default::default()
    });
    assert_eq!(response.code, 11, "no batch was stored");
}

/// Settles `cheat` (batch 1), checks `kind` fails against the honest batch 2 when `honest`
/// is given, then that it voids the cheat: requesters refunded, the transfer agent (and
/// `host`, if any) slashed 20% to the challenger, nobody paid after the window.
fn assert_challenge_wins(
    mut world: World,
    cheat: &MsgSettleBatch,
    kind: Kind,
    host: Option<&str>,
    honest_kind: Option<(Batch, Kind)>,
) {
    let escrows = (escrow(&world, "alice"), escrow(&world, "bob"));
    // What the honest batch, if any, debits and pays p0.
    let (alice_debit, bob_debit, p0_payout) = honest_kind.as_ref().map_or((0, 0, 0), |(b, _)| {
        let p0 = addr("p0");
        let payout = b.msg.hosts.iter().find(|l| l.host == p0);
        (
            line(b, "alice"),
            line(b, "bob"),
            payout.map_or(0, |l| l.payout.parse::<u128>().unwrap()),
        )
    });
    let result = settle(&mut world, cheat);
    assert_eq!(result.code, 0, "the cheat lands: {}", result.log);
    if let Some((honest_batch, honest_kind)) = honest_kind {
        let result = settle(&mut world, &honest_batch.msg);
        assert_eq!(result.code, 0, "{}", result.log);
        let carol = world.balance_of("carol");
        let result = challenge(&mut world, "carol", 2, honest_kind);
        assert_code(&result, 14, "challenge of an honest batch");
        assert_eq!(world.balance_of("carol"), carol - FEE);
        assert_eq!(batch(&world, 2).status, BatchStatus::Pending as i32);
    }
    let (ta_stake, carol) = (world.bonded(TA), world.balance_of("carol"));
    let host_stake = host.map(|h| world.bonded(h));
    // The hosts not at fault, and what the cheat's lines owe them.
    let wronged: Vec<(&str, u128, u128)> = ["p0", "p1"]
        .into_iter()
        .filter(|h| Some(*h) != host)
        .filter_map(|h| {
            let line = cheat.hosts.iter().find(|l| l.host == addr(h))?;
            Some((h, world.balance_of(h), line.payout.parse::<u128>().unwrap()))
        })
        .collect();
    let community = world.balance(&gonka_rewards::community_pool_address());
    let result = challenge(&mut world, "carol", 1, kind);
    assert_eq!(result.code, 0, "the challenge wins: {}", result.log);
    let voided = batch(&world, 1);
    assert_eq!(voided.status, BatchStatus::Voided as i32);
    assert!(!voided.voided_reason.is_empty());
    let mut slashed = ta_stake / 5;
    assert_eq!(world.bonded(TA), ta_stake - slashed);
    if let (Some(h), Some(stake)) = (host, host_stake) {
        assert_eq!(world.bonded(h), stake - stake / 5);
        slashed += stake / 5;
    }
    // A tenth of the slash to the challenger; the hosts not at fault paid their lines out of
    // the transfer agent's slash; the rest to the community pool.
    let bounty = slashed / 10;
    assert_eq!(world.balance_of("carol"), carol - FEE + bounty);
    let mut hosts_paid = 0;
    for (h, before, payout) in wronged {
        assert_eq!(
            world.balance_of(h),
            before + payout,
            "{h} is paid by the TA's slash"
        );
        hosts_paid += payout;
    }
    assert_eq!(
        world.balance(&gonka_rewards::community_pool_address()),
        community + slashed - bounty - hosts_paid
    );
    // Every debit of the cheat refunded; the honest batch's stays.
    assert_eq!(
        (escrow(&world, "alice"), escrow(&world, "bob")),
        (escrows.0 - alice_debit, escrows.1 - bob_debit)
    );
    // After both windows only the honest batch has paid.
    let p0 = world.balance_of("p0");
    wait(&mut world, WINDOW + 1);
    assert_eq!(batch(&world, 1).status, BatchStatus::Voided as i32);
    assert_eq!(world.balance_of("p0"), p0 + p0_payout);
}

/// [`assert_challenge_wins`] of `kind(cheat)` against `cheat`, after `kind` of the honest
/// batch 2 failed.
fn assert_wins_against_cheat_only(
    world: World,
    cheat: &Batch,
    kind: impl Fn(&Batch) -> Kind,
    host: Option<&str>,
) {
    let good = honest(2);
    let good_kind = kind(&good);
    assert_challenge_wins(
        world,
        &cheat.msg,
        kind(cheat),
        host,
        Some((good, good_kind)),
    );
}

/// [`world`] with carol, the challenger, sent `ngnk` by alice.
fn world_funding_carol(ngnk: u128) -> World {
    let mut world = world();
    let tx = world.tx(
        "alice",
        vec![gonka_client::tx::msg_send(
            &addr("alice"),
            &addr("carol"),
            ngnk,
        )],
    );
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    world
}

/// Carol can pay the fees of a few challenges.
fn world_with_carol() -> World {
    world_funding_carol(10 * FEE)
}

#[test]
fn a_leaf_with_a_forged_requester_signature_voids_its_batch_and_slashes_its_host() {
    let world = world_with_carol();
    let mut leaves = honest(1).leaves;
    leaves[1].record.as_mut().unwrap().requester_signature[5] ^= 1;
    let host = if leaves[1].executor_host == addr("p0") {
        "p0"
    } else {
        "p1"
    };
    let cheat = Batch::from_leaves(&addr(TA), 1, leaves).unwrap();
    let proof = cheat.leaf_proof(1).unwrap();
    let good = honest(2);
    let good_proof = good.leaf_proof(1).unwrap();
    assert_challenge_wins(
        world,
        &cheat.msg,
        Kind::InvalidLeaf(proof),
        Some(host),
        Some((good, Kind::InvalidLeaf(good_proof))),
    );
}

#[test]
fn a_transfer_agent_cannot_frame_a_host_with_a_leaf_it_made_up() {
    let world = world_with_carol();
    // A leaf naming p0's node, but with a receipt p0's node key never signed (and a forged
    // requester signature): the batch falls, p0 keeps its stake.
    let mut made_up = served("alice", "made-up", exec("p0", "n0", 99), (1, 1));
    made_up.record.requester_signature[3] ^= 1;
    assert_an_extra_leaf_voids_the_batch(world, made_up, None);
}

#[test]
fn a_charge_above_what_the_requester_signed_voids_its_batch() {
    let world = world_with_carol();
    let mut records = honest(1).leaves;
    // The requester signed for at most its completion tokens: the TA claims one more.
    let record = records[0].record.as_mut().unwrap();
    record.completion_tokens += 1;
    let leaves = Batch::build(&addr(TA), 1, served_of(&records)).unwrap();
    let index = leaves
        .leaves
        .iter()
        .position(|l| {
            let r = l.record.as_ref().unwrap();
            r.completion_tokens > r.max_completion_tokens
        })
        .unwrap() as u64;
    // The inflated count is no longer what the executor's receipt signed: only the
    // transfer agent is to blame.
    let proof = leaves.leaf_proof(index).unwrap();
    assert_challenge_wins(world, &leaves.msg, Kind::InvalidLeaf(proof), None, None);
}

/// Batch 1 is the honest batch plus `extra`: an `invalid_leaf` challenge of that leaf wins,
/// slashing the transfer agent and `host` (see [`assert_challenge_wins`]).
fn assert_an_extra_leaf_voids_the_batch(world: World, extra: Served, host: Option<&str>) {
    let id = extra.record.inference_id.clone();
    let mut records = served_of(&honest(1).leaves);
    records.push(extra);
    let cheat = Batch::build(&addr(TA), 1, records).unwrap();
    let index = cheat
        .leaves
        .iter()
        .position(|l| l.record.as_ref().unwrap().inference_id == id)
        .unwrap() as u64;
    let proof = cheat.leaf_proof(index).unwrap();
    assert_challenge_wins(world, &cheat.msg, Kind::InvalidLeaf(proof), host, None);
}

/// The work-integrity attack of a model priced above what the requester signed for, on a
/// committed batch: the leaf's cost is above its tokens at the signed price. The executor
/// signed the receipt of a request it should not have served at that price: it is slashed
/// with the transfer agent.
#[test]
fn a_price_above_what_the_requester_signed_voids_its_batch_and_slashes_its_host() {
    let mut input = request(TA, "pricey", MODEL, N0, (3, 4), COMMISSION);
    input.terms.max_price_per_token = PRICE - 1;
    let pricey = Served {
        record: signed_record("alice", N0.seed, &input),
        host: addr("p0"),
        cost: 7 * PRICE,
        work_per_token: 0,
    };
    assert_an_extra_leaf_voids_the_batch(world_with_carol(), pricey, Some("p0"));
}

/// The work-integrity attacks of a record paid off the chain's price (work credited for
/// less than it costs), claiming more tokens than `max_tokens_per_record`, or naming a model
/// the chain does not price, on a committed batch: each leaf is signed by its requester and
/// carries its executor's receipt, and each voids its batch and slashes that executor's host
/// with the transfer agent.
#[test]
fn a_leaf_off_the_chain_price_or_beyond_max_tokens_voids_its_batch_and_slashes_its_host() {
    let leaf = |nonce: &str, model: &str, tokens: (u64, u64), cost: u128| Served {
        record: work_record("alice", TA, nonce, model, N0, tokens, COMMISSION),
        host: addr("p0"),
        cost,
        work_per_token: 0,
    };
    let cheap = leaf("cheap", MODEL, (300, 400), 1);
    let long = leaf(
        "long",
        MODEL,
        (MAX_TOKENS, 1),
        (MAX_TOKENS as u128 + 1) * PRICE,
    );
    let unpriced = leaf("unpriced", "other/model", (3, 4), 7 * PRICE);
    for extra in [cheap, long, unpriced] {
        assert_an_extra_leaf_voids_the_batch(world_with_carol(), extra, Some("p0"));
    }
}

/// Work is weighed by the model: the same tokens credit `work_per_token` times more on a model
/// that costs 125 times the reference model's compute per token, so self-dealing on the cheapest model
/// buys no more power per unit of compute (on the old chain both credited 30 units). A leaf
/// that claims the large model's weight for a small model's tokens voids its batch and
/// slashes the host that co-signed it.
#[test]
fn work_is_weighed_by_the_model_and_a_leaf_overstating_its_weight_voids_its_batch() {
    let mut world = world();
    let on = |nonce: &str, model: &str, work_per_token: u64| Served {
        record: work_record("alice", TA, nonce, model, N0, (10, 20), COMMISSION),
        host: addr("p0"),
        cost: 30 * PRICE,
        work_per_token,
    };
    let weighed = Batch::build(
        &addr(TA),
        1,
        vec![
            on("small", MODEL, 0),
            on("large", LARGE, LARGE_WORK_PER_TOKEN),
        ],
    )
    .unwrap();
    let result = settle(&mut world, &weighed.msg);
    assert_eq!(result.code, 0, "{}", result.log);
    wait(&mut world, WINDOW);
    assert_eq!(batch(&world, 1).status, BatchStatus::Final as i32);
    assert_eq!(
        world.work(0),
        vec![(addr("p0"), 30 + 30 * LARGE_WORK_PER_TOKEN)]
    );

    let inflated = on("inflated", MODEL, LARGE_WORK_PER_TOKEN);
    assert_an_extra_leaf_voids_the_batch(world_with_carol(), inflated, Some("p0"));
}

/// The work-integrity attack of a transfer agent settling a request the requester signed
/// for another transfer agent (to collect its commission), on a committed batch.
#[test]
fn a_record_signed_for_another_transfer_agent_voids_the_batch_that_settles_it() {
    let foreign = Served {
        record: work_record("alice", "p0", "foreign", MODEL, N1, (2, 2), COMMISSION),
        host: addr("p1"),
        cost: 4 * PRICE,
        work_per_token: 0,
    };
    assert_an_extra_leaf_voids_the_batch(world_with_carol(), foreign, Some("p1"));
}

#[test]
fn unsorted_leaves_void_their_batch() {
    let world = world_with_carol();
    let mut leaves = honest(1).leaves;
    leaves.swap(2, 3);
    // Keep each host's chain honest in the new order so only the order is wrong.
    let served = served_of(&leaves);
    let rechained = rechain(served);
    let cheat = Batch::from_leaves(&addr(TA), 1, rechained).unwrap();
    let kind = |b: &Batch| {
        Kind::Unsorted(UnsortedLeaves {
            first: b.leaf_proof(2),
            second: b.leaf_proof(3),
        })
    };
    assert_wins_against_cheat_only(world, &cheat, kind, None);
}

/// Leaves in the given order with honest host chains.
fn rechain(served: Vec<Served>) -> Vec<gonka_proto::settlement::BatchLeaf> {
    let mut running: std::collections::BTreeMap<String, (u64, u64, u128)> = Default::default();
    served
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let tokens = s.record.prompt_tokens + s.record.completion_tokens;
            let (previous, work, payout) = running.get(&s.host).copied().unwrap_or_default();
            running.insert(
                s.host.clone(),
                (i as u64 + 1, work + tokens, payout + s.cost),
            );
            gonka_proto::settlement::BatchLeaf {
                record: Some(s.record),
                executor_host: s.host,
                cost: s.cost.to_string(),
                host_previous: previous,
                host_work: work + tokens,
                host_payout: (payout + s.cost).to_string(),
                work_per_token: s.work_per_token,
            }
        })
        .collect()
}

#[test]
fn a_leaf_sum_that_is_not_its_charge_voids_its_batch() {
    let world = world_with_carol();
    let honest_batch = honest(1);
    let mut nodes: Vec<_> = honest_batch
        .leaves
        .iter()
        .map(|l| leaf_node(l).unwrap())
        .collect();
    // Alice's first leaf is recorded at 100 more than its charge, and her line with it.
    let (index, _) = leaf_range(&honest_batch, "alice");
    nodes[index as usize].sum += 100;
    let mut cheat = Batch::assemble(&addr(TA), 1, honest_batch.leaves.clone(), nodes).unwrap();
    cheat.msg.total = cheat.tree.top().sum.to_string();
    line_mut(&mut cheat.msg, "alice").amount = (line(&honest_batch, "alice") + 100).to_string();
    assert_wins_against_cheat_only(world, &cheat, leaf_sum_mismatch(index), None);
}

/// A `sum_mismatch` challenge of leaf `index`'s node, with the leaf.
fn leaf_sum_mismatch(index: u64) -> impl Fn(&Batch) -> Kind {
    move |b: &Batch| {
        Kind::SumMismatch(SumMismatch {
            node: b.node_proof(0, index),
            leaf: Some(b.leaves[index as usize].clone()),
            ..Default::default()
        })
    }
}

/// The index of `host`'s first leaf in `batch`.
fn first_leaf_of(batch: &Batch, host: &str) -> u64 {
    let at = batch
        .leaves
        .iter()
        .position(|l| l.executor_host == addr(host));
    at.unwrap() as u64
}

/// `batch` with the tree node of leaf `index` recording `extra` more work than the leaf
/// (and `host`'s line claiming it, so the lines still add up to the root's work).
fn with_inflated_node(batch: &Batch, index: u64, extra: u64, host: &str) -> Batch {
    let mut nodes: Vec<_> = batch.leaves.iter().map(|l| leaf_node(l).unwrap()).collect();
    nodes[index as usize].work += extra;
    let mut cheat = Batch::assemble(&addr(TA), 1, batch.leaves.clone(), nodes).unwrap();
    let line = cheat.msg.hosts.iter_mut().find(|l| l.host == addr(host));
    line.unwrap().work_units += extra;
    cheat
}

/// A colluding transfer agent and host claim work nobody served: a host line above its
/// leaves' work. The root commits to the total work, which the lines must add up to; a line
/// may claim at most the work its payout buys at the chain's cheapest work (here the large
/// model's: 125 units per 2 ngnk); a node recording more work than its leaf (or children)
/// voids the batch by `sum_mismatch` (and no leaf below it can be proven when sampled).
#[test]
fn host_work_is_a_sum_of_the_tree_bounded_by_the_payout_and_an_inflated_node_voids_its_batch() {
    let mut world = world_with_carol();
    let honest_batch = honest(1);
    let p1 = addr("p1");
    let index = first_leaf_of(&honest_batch, "p1");
    // The line alone, over an honest tree: the lines do not add up to the root's work.
    let mut cheat = honest(1);
    let line = cheat.msg.hosts.iter_mut().find(|l| l.host == p1).unwrap();
    assert_eq!(line.payout, "40");
    line.work_units += 1_000_000;
    let result = settle(&mut world, &cheat.msg);
    assert_code(&result, 6, "a host line above the tree's work");
    assert!(result.log.contains("total_work"), "{}", result.log);
    // The tree too: a million work units for p1's 40 ngnk is more than they buy (2,500).
    let cheat = with_inflated_node(&honest_batch, index, 1_000_000, "p1");
    let result = settle(&mut world, &cheat.msg);
    assert_code(&result, 6, "work beyond the payout");
    assert!(
        result.log.contains("cheapest work on chain"),
        "{}",
        result.log
    );
    let number = world
        .query::<qs::BatchNumber>(pb::QueryBatchNumberRequest {
            transfer_agent: addr(TA),
        })
        .number;
    assert_eq!(number, 0, "nothing settled");
    // Within the bound, the node is the fraud, proven by its leaf.
    let cheat = with_inflated_node(&honest_batch, index, 100, "p1");
    assert_wins_against_cheat_only(world, &cheat, leaf_sum_mismatch(index), None);
}

#[test]
fn a_requester_line_that_is_not_its_leaves_voids_its_batch() {
    let world = world_with_carol();
    // Bob is charged 5 more and alice 5 less: the total still adds up.
    let mut cheat = honest(1);
    let (alice, bob) = (line(&cheat, "alice"), line(&cheat, "bob"));
    line_mut(&mut cheat.msg, "alice").amount = (alice - 5).to_string();
    line_mut(&mut cheat.msg, "bob").amount = (bob + 5).to_string();
    let (first, last) = leaf_range(&cheat, "bob");
    let bob = |b: &Batch| {
        Kind::RequesterMismatch(RequesterMismatch {
            requester: addr("bob"),
            first: b.leaf_proof(first),
            last: b.leaf_proof(last),
            before: first.checked_sub(1).and_then(|i| b.leaf_proof(i)),
            after: b.leaf_proof(last + 1),
        })
    };
    assert_wins_against_cheat_only(world, &cheat, bob, None);
}

#[test]
fn a_host_line_above_its_leaves_voids_its_batch_and_slashes_the_host() {
    let world = world_with_carol();
    // p0's line claims 1,000 more work units than its leaves' running total, and a leaf of
    // p1 records them in the tree, so the lines add up to the root's work.
    let honest_batch = honest(1);
    let p1_leaf = first_leaf_of(&honest_batch, "p1");
    let mut cheat = with_inflated_node(&honest_batch, p1_leaf, 1_000, "p1");
    let line = |msg: &mut MsgSettleBatch, host: &str| -> usize {
        msg.hosts.iter().position(|l| l.host == addr(host)).unwrap()
    };
    let (p0, p1) = (line(&mut cheat.msg, "p0"), line(&mut cheat.msg, "p1"));
    cheat.msg.hosts[p1].work_units -= 1_000;
    cheat.msg.hosts[p0].work_units += 1_000;
    let last = cheat.msg.hosts[p0].last_index;
    let kind = |b: &Batch, index| {
        Kind::HostMismatch(HostMismatch {
            leaf: b.leaf_proof(index),
            other: None,
        })
    };
    assert_wins_against_cheat_only(world, &cheat, |b: &Batch| kind(b, last), Some("p0"));
}

#[test]
fn a_record_settled_twice_voids_the_later_batch() {
    let mut world = world_with_carol();
    let first = honest(1);
    let result = settle(&mut world, &first.msg);
    assert_eq!(result.code, 0, "{}", result.log);
    // Batch 2 repeats alice's a1-1 among new records.
    let mut records = served_of(&honest(2).leaves);
    records.push(served("alice", "a1-1", N0, (10, 20)));
    let second = Batch::build(&addr(TA), 2, records).unwrap();
    let result = settle(&mut world, &second.msg);
    assert_eq!(result.code, 0, "{}", result.log);
    let repeated = served("alice", "a1-1", N0, (10, 20)).record.inference_id;
    let index_of = |b: &Batch| {
        b.leaves
            .iter()
            .position(|l| l.record.as_ref().unwrap().inference_id == repeated)
            .unwrap()
    };
    let (in_first, in_second) = (index_of(&first), index_of(&second) as u64);
    let claim = |other: u64| {
        Kind::Duplicate(DuplicateLeaf {
            leaf: second.leaf_proof(in_second),
            other_batch_id: 1,
            other: first.leaf_proof(other),
        })
    };
    // The first batch's other leaf is not a repeat.
    let result = challenge(&mut world, "carol", 2, claim((in_first as u64 + 1) % 5));
    assert_code(&result, 14, "different ids");
    let result = challenge(&mut world, "carol", 2, claim(in_first as u64));
    assert_eq!(result.code, 0, "{}", result.log);
    assert_eq!(batch(&world, 2).status, BatchStatus::Voided as i32);
    assert_eq!(batch(&world, 1).status, BatchStatus::Pending as i32);
    assert_eq!(escrow(&world, "alice"), ESCROW - line(&first, "alice"));
}

#[test]
fn a_proof_that_does_not_reach_the_root_is_refused() {
    let mut world = world_with_carol();
    let batch0 = honest(1);
    assert_eq!(settle(&mut world, &batch0.msg).code, 0);
    let mut proof = batch0.leaf_proof(1).unwrap();
    proof.index = 2;
    assert_code(
        &challenge(&mut world, "carol", 1, Kind::InvalidLeaf(proof)),
        13,
        "wrong index",
    );
    let mut proof = batch0.leaf_proof(1).unwrap();
    proof
        .leaf
        .as_mut()
        .unwrap()
        .record
        .as_mut()
        .unwrap()
        .requester_signature[0] ^= 1;
    assert_code(
        &challenge(&mut world, "carol", 1, Kind::InvalidLeaf(proof)),
        13,
        "leaf not in the tree",
    );
    assert_code(
        &challenge(
            &mut world,
            "carol",
            9,
            Kind::InvalidLeaf(batch0.leaf_proof(0).unwrap()),
        ),
        11,
        "no batch 9",
    );
    wait(&mut world, WINDOW);
    assert_code(
        &challenge(
            &mut world,
            "carol",
            1,
            Kind::InvalidLeaf(batch0.leaf_proof(0).unwrap()),
        ),
        12,
        "final batch",
    );
}

/// The least deposit of a leaf demand (the default parameter).
const DEPOSIT: u128 = 1_000_000;

fn demand(world: &mut World, batch_id: u64, index: u64, deposit: u128) -> ExecTxResult {
    let tx = world.tx(
        "carol",
        vec![msg_demand_leaf(&addr("carol"), batch_id, index, deposit)],
    );
    world.block(vec![tx]).result(0).clone()
}

/// Carol can also pay leaf-demand deposits.
fn world_with_rich_carol() -> World {
    world_funding_carol(10 * DEPOSIT)
}

#[test]
fn a_demanded_leaf_the_transfer_agent_provides_earns_it_the_deposit() {
    let mut world = world_with_rich_carol();
    let batch0 = honest(1);
    assert_eq!(settle(&mut world, &batch0.msg).code, 0);
    // Refusals first: too small a deposit, no such leaf, a second demand of the same leaf.
    assert_code(&demand(&mut world, 1, 2, DEPOSIT - 1), 13, "small deposit");
    assert_code(&demand(&mut world, 1, 5, DEPOSIT), 13, "no leaf 5");
    let carol = world.balance_of("carol");
    assert_eq!(demand(&mut world, 1, 2, DEPOSIT).code, 0);
    assert_eq!(world.balance_of("carol"), carol - FEE - DEPOSIT);
    assert_code(&demand(&mut world, 1, 2, DEPOSIT), 13, "demanded twice");
    // A wrong leaf does not answer it; the right one does.
    let ta = world.balance_of(TA);
    let wrong = batch0.leaf_proof(3).unwrap();
    let tx = world.tx(TA, vec![msg_provide_leaf(&addr(TA), 1, wrong)]);
    assert_code(
        world.block(vec![tx]).result(0),
        13,
        "leaf 3 answers no demand",
    );
    let mut forged = batch0.leaf_proof(2).unwrap();
    forged.leaf.as_mut().unwrap().cost = "1".into();
    let tx = world.tx(TA, vec![msg_provide_leaf(&addr(TA), 1, forged)]);
    assert_code(
        world.block(vec![tx]).result(0),
        13,
        "a leaf not in the tree",
    );
    let tx = world.tx(
        TA,
        vec![msg_provide_leaf(
            &addr(TA),
            1,
            batch0.leaf_proof(2).unwrap(),
        )],
    );
    let block = world.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(world.balance_of(TA), ta - 3 * FEE + DEPOSIT);
    // A demand that could not be answered before the batch is final is refused.
    assert_code(&demand(&mut world, 1, 0, DEPOSIT), 12, "too close to final");
    // The batch stands and pays out.
    let now = world.chain.height();
    let final_at = batch(&world, 1).final_at;
    wait(&mut world, final_at - now);
    assert_eq!(batch(&world, 1).status, BatchStatus::Final as i32);
    // Too late: the window is over.
    assert_code(&demand(&mut world, 1, 0, DEPOSIT), 12, "final batch");
}

#[test]
fn a_demanded_leaf_left_unanswered_voids_the_batch() {
    let mut world = world_with_rich_carol();
    assert_eq!(settle(&mut world, &honest(1).msg).code, 0);
    let (carol, ta_stake) = (world.balance_of("carol"), world.bonded(TA));
    let hosts = ["p0", "p1"].map(|h| (h, world.balance_of(h)));
    assert_eq!(demand(&mut world, 1, 4, DEPOSIT).code, 0);
    let deadline = world.chain.height() + ANSWER;
    let now = world.chain.height();
    wait(&mut world, deadline + 1 - now);
    let voided = batch(&world, 1);
    assert_eq!(voided.status, BatchStatus::Voided as i32, "{voided:?}");
    assert!(
        voided.voided_reason.contains("leaf 4"),
        "{}",
        voided.voided_reason
    );
    let slashed = ta_stake / 5;
    assert_eq!(world.bonded(TA), ta_stake - slashed);
    // A tenth of the slash to the challenger (its deposit back too); no host is at fault, so
    // both are paid their lines out of the transfer agent's slash.
    assert_eq!(world.balance_of("carol"), carol - FEE + slashed / 10);
    for (h, before) in hosts {
        let payout: u128 = honest(1)
            .msg
            .hosts
            .iter()
            .find(|l| l.host == addr(h))
            .map_or(0, |l| l.payout.parse().unwrap());
        assert_eq!(
            world.balance_of(h),
            before + payout,
            "{h} is paid by the TA's slash"
        );
    }
    assert_eq!(
        (escrow(&world, "alice"), escrow(&world, "bob")),
        (ESCROW, ESCROW),
        "every debit refunded"
    );
}

#[test]
fn a_leaf_signed_too_long_before_its_batch_voids_it_and_slashes_only_its_transfer_agent() {
    // Signed more than MAX_AGE seconds before the batch's block time: as if the TA had held
    // the host's co-signed leaf until it aged out.
    let mut input = request(TA, "stale", MODEL, N0, (2, 2), COMMISSION);
    input.terms.timestamp = 1_500_000_000;
    let stale = Served {
        record: signed_record("alice", N0.seed, &input),
        host: addr("p0"),
        cost: 4 * PRICE,
        work_per_token: 0,
    };
    // When the batch lands is the TA's choice, not the host's: the host is not slashed and is
    // paid its line out of the TA's slash (on the old chain it was slashed 20% too).
    assert_an_extra_leaf_voids_the_batch(world_with_carol(), stale, None);
}

#[test]
fn final_batches_are_pruned_after_the_keep_time() {
    // One block per second in the harness; batches kept 30 s after their block.
    let mut world = world_keeping(30);
    let result = settle(&mut world, &honest(1).msg);
    assert_eq!(result.code, 0, "{}", result.log);
    let settled_at = world.chain.height();
    wait(&mut world, 29);
    assert_eq!(batch(&world, 1).status, BatchStatus::Final as i32);
    // The TA's batch number finds it too (what its leaf endpoint names a batch by).
    let by_number = pb::QueryBatchRequest {
        transfer_agent: addr(TA),
        number: 1,
        ..Default::default()
    };
    let found = world.query::<qs::Batch>(by_number.clone()).batch.unwrap();
    assert_eq!(found, batch(&world, 1));
    let now = world.chain.height();
    wait(&mut world, settled_at + 30 - now);
    let by_id = pb::QueryBatchRequest {
        id: 1,
        ..Default::default()
    };
    for request in [by_id, by_number] {
        let response = world.query_raw::<qs::Batch>(request);
        assert_eq!(
            (response.codespace.as_str(), response.code),
            ("settlement", 11),
            "batch 1 is pruned, from its index too"
        );
    }
}

/// Settles the TA's batch 1: [`honest`]'s leaves plus alice's request `nonce` with a forged
/// requester signature (no host's receipt on it); returns the batch and that leaf's index.
fn settle_with_planted_leaf(world: &mut World, nonce: &str) -> (Batch, u64) {
    let mut records = served_of(&honest(1).leaves);
    let mut made_up = served("alice", nonce, exec("p0", "n0", 99), (1, 1));
    made_up.record.requester_signature[3] ^= 1;
    let id = made_up.record.inference_id.clone();
    records.push(made_up);
    let cheat = Batch::build(&addr(TA), 1, records).unwrap();
    assert_eq!(settle(world, &cheat.msg).code, 0);
    let index = cheat
        .leaves
        .iter()
        .position(|l| l.record.as_ref().unwrap().inference_id == id)
        .unwrap() as u64;
    (cheat, index)
}

#[test]
fn a_transfer_agent_voiding_its_own_batch_gets_its_slash_back_never() {
    let mut world = world_with_carol();
    // A batch with a made-up leaf (no host's receipt on it), challenged by its own TA.
    let (cheat, index) = settle_with_planted_leaf(&mut world, "own");
    let pool = gonka_rewards::community_pool_address();
    let (stake, liquid, pooled) = (world.bonded(TA), world.balance_of(TA), world.balance(&pool));
    let result = challenge(
        &mut world,
        TA,
        1,
        Kind::InvalidLeaf(cheat.leaf_proof(index).unwrap()),
    );
    assert_eq!(result.code, 0, "{}", result.log);
    assert_eq!(batch(&world, 1).status, BatchStatus::Voided as i32);
    // It loses the slash and gains nothing: its hosts, whose receipts are not on the bad
    // leaf, are paid their lines out of it, and the community pool keeps the rest.
    assert_eq!(world.bonded(TA), stake - stake / 5);
    assert_eq!(world.balance_of(TA), liquid - FEE);
    assert_eq!(
        world.balance(&pool),
        pooled + stake / 5 - host_payouts(&cheat.msg)
    );
}

/// Attack (issue 34, item 4): a transfer agent plants a bad leaf in its own batch and has a
/// sybil (carol) challenge it. The whole 20% slash used to go to the challenger — a free
/// void that refunds the requesters (perhaps its own sybils) and leaves the hosts who served
/// unpaid. Now the challenger gets a tenth of the slash, the hosts not at fault are paid
/// their lines out of the transfer agent's slash, and the community pool keeps the rest:
/// the transfer agent and its sybil together lose nine tenths of the slash.
#[test]
fn a_transfer_agent_voiding_its_own_batch_through_a_sybil_loses_and_its_hosts_are_paid() {
    let mut world = world_with_carol();
    let (cheat, index) = settle_with_planted_leaf(&mut world, "planted");
    let pool = gonka_rewards::community_pool_address();
    let (stake, ta, carol, pooled) = (
        world.bonded(TA),
        world.balance_of(TA),
        world.balance_of("carol"),
        world.balance(&pool),
    );
    let hosts = ["p0", "p1"].map(|h| (h, world.balance_of(h)));
    let result = challenge(
        &mut world,
        "carol",
        1,
        Kind::InvalidLeaf(cheat.leaf_proof(index).unwrap()),
    );
    assert_eq!(result.code, 0, "{}", result.log);
    assert_eq!(batch(&world, 1).status, BatchStatus::Voided as i32);
    let slashed = stake / 5;
    let bounty = slashed / 10;
    let ring_before = stake + ta + carol;
    let ring_after = world.bonded(TA) + world.balance_of(TA) + world.balance_of("carol");
    assert_eq!(
        ring_before - ring_after,
        slashed - bounty + FEE,
        "the transfer agent and its sybil lose nine tenths of the slash (and the fee)"
    );
    for (h, before) in hosts {
        let payout: u128 = cheat
            .msg
            .hosts
            .iter()
            .find(|l| l.host == addr(h))
            .map_or(0, |l| l.payout.parse().unwrap());
        assert!(payout > 0, "{h} served in the batch");
        assert_eq!(
            world.balance_of(h),
            before + payout,
            "{h} is paid for its service"
        );
    }
    assert_eq!(
        world.balance(&pool),
        pooled + slashed - bounty - host_payouts(&cheat.msg)
    );
}

/// What `msg`'s host lines pay hosts other than its transfer agent.
fn host_payouts(msg: &MsgSettleBatch) -> u128 {
    msg.hosts
        .iter()
        .filter(|l| l.host != msg.transfer_agent)
        .map(|l| l.payout.parse::<u128>().unwrap())
        .sum()
}

/// A second transfer agent in [`world`]: p1, which also hosts.
const OTHER_TA: &str = "p1";

/// The open demands `/settlement/demands` lists for `agent` (at most `limit`, 0: the
/// default), as (batch id, leaf index).
fn open_demands(world: &World, agent: &str, limit: u64) -> Vec<(u64, u64)> {
    world
        .query::<qs::Demands>(pb::QueryDemandsRequest {
            transfer_agent: addr(agent),
            limit,
            ..Default::default()
        })
        .demands
        .iter()
        .map(|d| (d.batch_id, d.index))
        .collect()
}

#[test]
fn a_transfer_agent_lists_the_open_demands_on_its_batches_until_answered_or_expired() {
    let mut world = world_with_rich_carol();
    // p1 becomes a transfer agent too, with an escrow of alice, and settles batch 2.
    let txs = vec![
        world.tx(
            OTHER_TA,
            vec![register_ta(OTHER_TA, "https://other.example")],
        ),
        world.tx(
            "alice",
            vec![msg_open_escrow(
                &addr("alice"),
                &addr(OTHER_TA),
                ESCROW,
                1_000,
            )],
        ),
    ];
    let block = world.block(txs);
    assert!(
        block.response.tx_results.iter().all(|r| r.code == 0),
        "{:?}",
        block.response.tx_results
    );
    let batch1 = honest(1);
    assert_eq!(settle(&mut world, &batch1.msg).code, 0);
    let record = work_record("alice", OTHER_TA, "other-1", MODEL, N0, (3, 3), COMMISSION);
    let other = Batch::build(
        &addr(OTHER_TA),
        1,
        vec![Served {
            record,
            host: addr("p0"),
            cost: 6 * PRICE,
            work_per_token: 0,
        }],
    )
    .unwrap();
    let tx = world.tx(OTHER_TA, vec![msg_settle_batch(&signed(&other.msg))]);
    let block = world.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(
        batch(&world, 2).settled.unwrap().transfer_agent,
        addr(OTHER_TA)
    );
    assert!(open_demands(&world, TA, 0).is_empty());

    // Leaves 3 and 1 of batch 1 and leaf 0 of batch 2 are demanded, in that order.
    assert_eq!(demand(&mut world, 1, 3, DEPOSIT).code, 0);
    let expires_3 = world.chain.height() + ANSWER + 1;
    assert_eq!(demand(&mut world, 2, 0, DEPOSIT).code, 0);
    let expires_other = world.chain.height() + ANSWER + 1;
    assert_eq!(demand(&mut world, 1, 1, DEPOSIT).code, 0);
    // Each agent sees exactly its own, by batch then leaf; a limit cuts the list.
    assert_eq!(open_demands(&world, TA, 0), [(1, 1), (1, 3)]);
    assert_eq!(open_demands(&world, TA, 1), [(1, 1)]);
    let later = world.query::<qs::Demands>(pb::QueryDemandsRequest {
        transfer_agent: addr(TA),
        start_batch_id: 1,
        start_index: 2,
        ..Default::default()
    });
    assert_eq!(
        later
            .demands
            .iter()
            .map(|d| (d.batch_id, d.index))
            .collect::<Vec<_>>(),
        [(1, 3)],
        "a later start pages on"
    );
    assert_eq!(open_demands(&world, OTHER_TA, 0), [(2, 0)]);
    assert!(open_demands(&world, "p0", 0).is_empty());
    let listed = world.query::<qs::Demands>(pb::QueryDemandsRequest {
        transfer_agent: addr(TA),
        limit: u64::MAX,
        ..Default::default()
    });
    let first = &listed.demands[0];
    assert_eq!(
        (first.challenger.as_str(), first.deposit.as_str()),
        (addr("carol").as_str(), DEPOSIT.to_string().as_str())
    );
    let refused = world.query_raw::<qs::Demands>(pb::QueryDemandsRequest {
        transfer_agent: "not-an-address".into(),
        limit: 0,
        ..Default::default()
    });
    assert_ne!(refused.code, 0, "a malformed transfer agent is refused");

    // The answered demand leaves the list.
    let tx = world.tx(
        TA,
        vec![msg_provide_leaf(
            &addr(TA),
            1,
            batch1.leaf_proof(1).unwrap(),
        )],
    );
    let block = world.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(open_demands(&world, TA, 0), [(1, 3)]);

    // The unanswered one leaves it when it expires (voiding batch 1); the other agent's
    // stays until its own deadline passes.
    let now = world.chain.height();
    wait(&mut world, expires_3 - now);
    assert_eq!(batch(&world, 1).status, BatchStatus::Voided as i32);
    assert!(open_demands(&world, TA, 0).is_empty());
    assert_eq!(open_demands(&world, OTHER_TA, 0), [(2, 0)]);
    let now = world.chain.height();
    wait(&mut world, expires_other - now);
    assert_eq!(batch(&world, 2).status, BatchStatus::Voided as i32);
    assert!(open_demands(&world, OTHER_TA, 0).is_empty());
}

#[test]
fn a_demand_on_a_pruned_voided_batch_leaves_the_list_and_still_returns_its_deposit() {
    // Batches kept 2 s after their block (one block per second in the harness), and every
    // test leaf is then too old for its batch: a challenge on any leaf voids it.
    let mut world = world_keeping(2);
    let tx = world.tx(
        "alice",
        vec![gonka_client::tx::msg_send(
            &addr("alice"),
            &addr("carol"),
            10 * DEPOSIT,
        )],
    );
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    let batch1 = honest(1);
    assert_eq!(settle(&mut world, &batch1.msg).code, 0);
    assert_eq!(demand(&mut world, 1, 2, DEPOSIT).code, 0);
    let expires = world.chain.height() + ANSWER + 1;
    let result = challenge(
        &mut world,
        "carol",
        1,
        Kind::InvalidLeaf(batch1.leaf_proof(0).unwrap()),
    );
    assert_eq!(result.code, 0, "{}", result.log);
    // Voided but still stored: the agent could still answer for the deposit.
    assert_eq!(batch(&world, 1).status, BatchStatus::Voided as i32);
    assert_eq!(open_demands(&world, TA, 0), [(1, 2)]);
    // Pruned: nobody can answer any more, so the agent no longer sees it...
    wait(&mut world, 1);
    let response = world.query_raw::<qs::Batch>(pb::QueryBatchRequest {
        id: 1,
        ..Default::default()
    });
    assert_eq!(
        (response.codespace.as_str(), response.code),
        ("settlement", 11),
        "batch 1 is pruned"
    );
    assert!(world.chain.height() < expires);
    assert!(open_demands(&world, TA, 0).is_empty());
    // ...and the deposit still comes back at the deadline.
    let carol = world.balance_of("carol");
    let now = world.chain.height();
    wait(&mut world, expires - now);
    assert_eq!(world.balance_of("carol"), carol + DEPOSIT);
}

#[test]
fn an_imported_genesis_lists_its_open_demands_again() {
    use gonka_proto::query::Query;
    use prost::Message;

    let mut world = world_with_rich_carol();
    assert_eq!(settle(&mut world, &honest(1).msg).code, 0);
    assert_eq!(demand(&mut world, 1, 2, DEPOSIT).code, 0);
    assert_eq!(demand(&mut world, 1, 0, DEPOSIT).code, 0);
    let exported = world.chain.app().export_genesis().unwrap();
    assert_eq!(
        exported["settlement"]["demands"].as_array().map(Vec::len),
        Some(2),
        "{}",
        exported["settlement"]
    );
    let (_dir, new) = chain_from_export(&exported);
    let request = pb::QueryDemandsRequest {
        transfer_agent: addr(TA),
        limit: 0,
        ..Default::default()
    };
    let response = new.query(qs::Demands::PATH, request.encode_to_vec());
    assert_eq!(response.code, 0, "{}", response.log);
    let listed: Vec<_> = pb::QueryDemandsResponse::decode(response.value.as_ref())
        .unwrap()
        .demands
        .iter()
        .map(|d| (d.batch_id, d.index))
        .collect();
    assert_eq!(listed, [(1, 0), (1, 2)]);
}

/// Every leaf sampled: the block after the batch, the chain demands each one from its
/// transfer agent (no deposit, the community pool as challenger); provided, each becomes a
/// work record for x/disputes to validate, marked with its sampling chance; the batch then
/// pays as usual.
#[test]
fn the_sampled_leaves_of_a_batch_are_demanded_and_provided_ones_become_work_records() {
    let mut world = world_sampling(1_000_000);
    let batch0 = honest(1);
    let p0 = world.balance_of("p0");
    assert_eq!(settle(&mut world, &batch0.msg).code, 0);
    let settled_at = world.chain.height();
    assert!(open_demands(&world, TA, 0).is_empty());
    let block = world.block(vec![]);
    let sampled = block.events("leaves_sampled");
    assert_eq!(sampled.len(), 1, "{sampled:?}");
    assert_eq!(sampled[0]["count"], "5");
    let demands = world
        .query::<qs::Demands>(pb::QueryDemandsRequest {
            transfer_agent: addr(TA),
            limit: 0,
            ..Default::default()
        })
        .demands;
    assert_eq!(
        demands
            .iter()
            .map(|d| (d.batch_id, d.index))
            .collect::<Vec<_>>(),
        (0..5).map(|i| (1, i)).collect::<Vec<_>>()
    );
    let pool = gonka_rewards::community_pool_address();
    for d in &demands {
        assert_eq!(
            (d.challenger.as_str(), d.deposit.as_str()),
            (pool.as_str(), "0")
        );
        assert_eq!(d.deadline, settled_at + 1 + ANSWER);
    }
    let provide: Vec<_> = (0..5)
        .map(|i| msg_provide_leaf(&addr(TA), 1, batch0.leaf_proof(i).unwrap()))
        .collect();
    let tx = world.tx(TA, provide);
    let result = world.block(vec![tx]).result(0).clone();
    assert_eq!(result.code, 0, "{}", result.log);
    assert!(open_demands(&world, TA, 0).is_empty());
    for leaf in &batch0.leaves {
        let record = leaf.record.clone().unwrap();
        let stored = world
            .query::<gonka_proto::query::inference::Record>(
                gonka_proto::inference::QueryRecordRequest {
                    inference_id: record.inference_id.clone(),
                },
            )
            .record
            .unwrap();
        assert_eq!(stored.record, Some(record));
        assert_eq!(
            (
                stored.transfer_agent.as_str(),
                stored.executor_host.as_str(),
                stored.cost.as_str(),
                stored.sampled_ppm
            ),
            (
                addr(TA).as_str(),
                leaf.executor_host.as_str(),
                leaf.cost.as_str(),
                1_000_000
            )
        );
    }
    // The stored records are listed by epoch and by executor node.
    let ids_of = |epoch: u64, executor: &str| {
        let mut ids: Vec<String> = world
            .query_all::<gonka_proto::query::inference::Records>(
                gonka_proto::inference::QueryRecordsRequest {
                    epoch,
                    executor: executor.into(),
                    ..Default::default()
                },
            )
            .into_iter()
            .map(|r| r.record.unwrap().inference_id)
            .collect();
        ids.sort();
        ids
    };
    let leaf_ids = |node: Option<&str>| {
        let mut ids: Vec<String> = batch0
            .leaves
            .iter()
            .filter_map(|l| l.record.as_ref())
            .filter(|r| node.is_none_or(|n| r.executor_node == n))
            .map(|r| r.inference_id.clone())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids_of(0, ""), leaf_ids(None));
    assert_eq!(ids_of(0, "n1"), leaf_ids(Some("n1")));
    assert!(!leaf_ids(Some("n1")).is_empty() && leaf_ids(Some("n1")).len() < 5);
    assert!(ids_of(1, "").is_empty());
    let now = world.chain.height();
    wait(&mut world, settled_at + WINDOW - now);
    assert_eq!(batch(&world, 1).status, BatchStatus::Final as i32);
    assert_eq!(
        world.balance_of("p0"),
        p0 + 82,
        "sampling takes nothing from the host"
    );
}

/// A proposer can leave a height without a group signature (by trimming its last commit
/// below the slot threshold, or as CometBFT's harness does here, without a beacon
/// transaction), and a value it could choose must seed nothing: the draws that would use
/// such a height (leaf sampling, record sampling, dispute committees) wait for the next
/// height the group signed, and a batch waiting for its sampling does not become final.
#[test]
fn the_draws_of_a_height_no_group_signed_wait_for_the_next_signed_height() {
    let (mut world, group) = world_grouped();
    let unsigned = |world: &World| {
        let height = world.chain.height() - 1;
        let beacon = world
            .query::<gonka_proto::query::bls::Beacon>(gonka_proto::bls::QueryBeaconRequest {
                height,
            })
            .beacon
            .unwrap();
        beacon.source != "group"
    };
    let batch0 = honest(1);
    let tx = world.tx(TA, vec![msg_settle_batch(&signed(&batch0.msg))]);
    let block = world.signed_block(&group, vec![tx]);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    for _ in 0..WINDOW + 2 {
        let block = world.block(vec![]);
        assert!(unsigned(&world));
        assert!(block.events("leaves_sampled").is_empty());
        assert!(open_demands(&world, TA, 0).is_empty());
    }
    assert_eq!(
        batch(&world, 1).status,
        BatchStatus::Pending as i32,
        "a batch whose leaves were not sampled does not become final"
    );
    let block = world.signed_block(&group, vec![]);
    assert!(!unsigned(&world));
    assert_eq!(block.events("leaves_sampled")[0]["count"], "5");
    let deadline = world.chain.height() + ANSWER;
    let demands = world
        .query::<qs::Demands>(pb::QueryDemandsRequest {
            transfer_agent: addr(TA),
            ..Default::default()
        })
        .demands;
    assert_eq!(demands.len(), 5);
    assert!(demands.iter().all(|d| d.deadline == deadline));
    assert_eq!(
        batch(&world, 1).final_at,
        deadline + 1,
        "the window outlasts the deadline"
    );

    // The provided leaves become records; x/disputes samples them at the next signed height.
    let provide: Vec<_> = (0..5)
        .map(|i| msg_provide_leaf(&addr(TA), 1, batch0.leaf_proof(i).unwrap()))
        .collect();
    let tx = world.tx(TA, provide);
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    let block = world.block(vec![]);
    assert!(block.events("validation_sampled").is_empty());
    let block = world.signed_block(&group, vec![]);
    assert_eq!(block.events("validation_sampled").len(), 5);

    // alice disputes an answer: its committee is drawn at the next signed height, with the
    // whole deadline from there.
    let id = batch0
        .leaves
        .iter()
        .filter_map(|l| l.record.as_ref())
        .find(|r| r.requester == addr("alice"))
        .unwrap()
        .inference_id
        .clone();
    let tx = world.tx(
        "alice",
        vec![gonka_client::disputes::msg_open_dispute(
            &addr("alice"),
            &id,
            1_000_000_000,
        )],
    );
    let block = world.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    for _ in 0..3 {
        assert!(world.block(vec![]).events("dispute_committee").is_empty());
    }
    let block = world.signed_block(&group, vec![]);
    let drawn = block.events("dispute_committee");
    assert_eq!(drawn.len(), 1);
    let dispute = world
        .query::<gonka_proto::query::disputes::Dispute>(
            gonka_proto::disputes::QueryDisputeRequest {
                id: drawn[0]["dispute_id"].parse().unwrap(),
            },
        )
        .dispute
        .unwrap();
    assert!(!dispute.committee.is_empty());
    assert_eq!(
        dispute.deadline_height,
        world.chain.height() - 1 + gonka_disputes::default_params().dispute_deadline_blocks
    );
    assert!(world.chain.height() > deadline);
    assert_eq!(
        batch(&world, 1).status,
        BatchStatus::Final as i32,
        "sampled and answered, the batch became final after its extended window"
    );
}

/// A sampled leaf its transfer agent does not provide in time voids the batch (requesters
/// refunded) and slashes the transfer agent, to the community pool.
#[test]
fn a_sampled_leaf_left_unanswered_voids_the_batch_and_slashes_the_transfer_agent() {
    let mut world = world_sampling(1_000_000);
    let pool = gonka_rewards::community_pool_address();
    let (ta_stake, community) = (world.bonded(TA), world.balance(&pool));
    assert_eq!(settle(&mut world, &honest(1).msg).code, 0);
    wait(&mut world, 2 + ANSWER);
    let voided = batch(&world, 1);
    assert_eq!(voided.status, BatchStatus::Voided as i32, "{voided:?}");
    assert!(
        voided.voided_reason.contains("not provided"),
        "{}",
        voided.voided_reason
    );
    let slashed = ta_stake / 5;
    assert_eq!(world.bonded(TA), ta_stake - slashed);
    // The pool is the challenger: bounty and rest alike go to it, less the hosts' lines.
    assert_eq!(
        world.balance(&pool),
        community + slashed - host_payouts(&honest(1).msg)
    );
    assert_eq!(
        (escrow(&world, "alice"), escrow(&world, "bob")),
        (ESCROW, ESCROW),
        "every debit refunded"
    );
}

/// The work-integrity attack of acting without stake at risk, on committed batches: a batch
/// paying a host that unbonded below `min_stake` is refused whole (inference 4, `NotStaked`),
/// and one settled by a transfer agent that did (which drops it from the registry) too
/// (settlement 15, `NotTransferAgent`); neither debits anything.
#[test]
fn a_batch_paying_an_unstaked_host_or_settled_by_an_unstaked_transfer_agent_is_refused() {
    let min_stake = 1_000;
    for (unstaked, refusal) in [("p1", ("inference", 4)), (TA, ("settlement", 15))] {
        let mut world = world();
        let bond = world.bonded(unstaked);
        let tx = world.tx(
            unstaked,
            vec![unstake_msg(unstaked, bond - (min_stake - 1))],
        );
        assert_eq!(world.block(vec![tx]).result(0).code, 0);
        let result = settle(&mut world, &honest(1).msg);
        assert_eq!(
            (result.codespace.as_str(), result.code),
            refusal,
            "{unstaked}: {}",
            result.log
        );
        assert_eq!(
            (escrow(&world, "alice"), escrow(&world, "bob")),
            (ESCROW, ESCROW),
            "nothing is debited"
        );
    }
}
