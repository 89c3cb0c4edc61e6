//! x/pol through the ABCI harness with ordinary signed txs: a training job created, joined
//! and run round by round; checkpoints paid and their work credited to the epoch; sampled
//! checkpoints re-executed by their assigned validator, a cheating trainer faulted by the
//! committee and slashed 20% to the honest side, a false accuser slashed in turn; missed
//! rounds and unfilled jobs returning their money; every bad input refused with its own
//! code and no state change.
//!
//! Every block goes through `World::block`, which checks after each block that bank
//! balances sum to the supply and that the supply does not change outside epoch ends (so
//! budgets, payouts and slashes only move money), and stake's invariants.

mod common;
mod support;

use gonka_client::pol::{
    msg_join_training, msg_publish_model, msg_submit_checkpoint, msg_verify_checkpoint,
    CheckpointHashes, ReExecuted,
};
use gonka_client::tx::any_of;
use gonka_proto::pol as pb;
use gonka_proto::query as q;
use gonka_sdk::Any;
use k256::sha2::{Digest, Sha256};
use prost::Message;
use serde_json::json;
use support::*;
use tendermint_proto::v0_38::abci::ExecTxResult;

/// Bond of every participant.
const BOND: u128 = 1_000_000;
/// 20% of one bond.
const SLASH: u128 = BOND / 5;
/// The fee of every test tx.
const FEE: u128 = common::MIN_FEE;
/// A job of 3 workers and 2 rounds: 6 slots of 1,500 ngnk, each paying its worker 1,350 and
/// its verification 150 (10%).
const WORKERS: u64 = 3;
const ROUNDS: u64 = 2;
const BUDGET: u128 = 9_000;
const SLOT: u128 = 1_500;
const VERIFY_FEE: u128 = 150;
const PAY: u128 = SLOT - VERIFY_FEE;
const ROUND_BLOCKS: u64 = 5;
/// Work units of one checkpoint: 64-byte sequences × 4 per step × 5 steps × 3.
const UNITS: u64 = 64 * 4 * 5 * 3;

/// Pol parameters with `sample_ppm` of checkpoints re-executed, short deadlines and
/// budgets of any size.
fn params(sample_ppm: u64) -> pb::Params {
    pb::Params {
        checkpoint_sample_ppm: sample_ppm,
        verification_deadline_blocks: 3,
        dispute_deadline_blocks: 4,
        formation_blocks: 10,
        min_reward_budget: "1".into(),
        ..gonka_pol::default_params()
    }
}

/// Six participants p0..p5 bonding `BOND` each; 1,000-block epochs (no epoch ends unless a
/// test finishes one); alice creates the jobs.
fn world(sample_ppm: u64) -> World {
    let mut setup = Setup::new(6, BOND);
    setup.epoch_length = 1_000;
    World::with_genesis(setup, |state| {
        state["pol"] = json!({ "params": params(sample_ppm) });
    })
}

fn create_job(budget: u128, round_blocks: u64) -> pb::MsgCreateTrainingJob {
    pb::MsgCreateTrainingJob {
        creator: addr("alice"),
        config: Some(training_config()),
        dataset_root: vec![7; 32],
        seed: 42,
        outer_rounds: ROUNDS,
        worker_count: WORKERS,
        round_blocks,
        reward_budget: budget.to_string(),
    }
}

fn join(host: &str, job: u64) -> Any {
    msg_join_training(&addr(host), job, &format!("http://{host}.example:9400"))
}

fn hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// The end weights of an honest round `round` (any worker's re-execution gets the same).
fn honest_weights(worker: &str, round: u64) -> String {
    format!("weights of {worker} after round {round}")
}

/// `worker`'s checkpoint of `round` ending in `weights`.
fn checkpoint(worker: &str, job: u64, round: u64, weights: &str) -> Any {
    let hashes = CheckpointHashes {
        start_weights: hash(&format!("start of round {round}")),
        weights: hash(weights),
        optimizer_state: hash(&format!("adamw of {weights}")),
        data_indices: hash(&format!("indices of {worker} in round {round}")),
        pseudo_gradient: hash(&format!("delta of {weights}")),
    };
    msg_submit_checkpoint(&addr(worker), job, round, &hashes, 2_500_000)
}

/// A re-execution of `worker`'s round that ends in `weights`.
fn verdict(validator: &str, job: u64, round: u64, worker: &str, weights: &str) -> Any {
    let found = ReExecuted::Hashes {
        weights: hash(weights),
        optimizer_state: hash(&format!("adamw of {weights}")),
    };
    msg_verify_checkpoint(&addr(validator), job, round, &addr(worker), found)
}

fn assert_code(result: &ExecTxResult, code: u32, what: &str) {
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("pol", code),
        "{what}: {}",
        result.log
    );
}

fn assert_ok(block: &Block) {
    for (i, result) in block.response.tx_results.iter().enumerate() {
        assert_eq!(result.code, 0, "tx {i}: {}", result.log);
    }
}

fn job(world: &World, id: u64) -> pb::TrainingJob {
    world
        .query::<q::pol::Job>(pb::QueryJobRequest { id })
        .job
        .unwrap()
}

fn checkpoints(world: &World, id: u64, round: u64) -> Vec<pb::Checkpoint> {
    world.query_all::<q::pol::Checkpoints>(pb::QueryCheckpointsRequest {
        job_id: id,
        round,
        pagination: None,
    })
}

fn checkpoint_of(world: &World, id: u64, round: u64, worker: &str) -> pb::Checkpoint {
    checkpoints(world, id, round)
        .into_iter()
        .find(|c| c.worker == addr(worker))
        .unwrap()
}

fn duties(world: &World, validator: &str) -> Vec<pb::Checkpoint> {
    world
        .query::<q::pol::Duties>(pb::QueryDutiesRequest {
            validator: addr(validator),
        })
        .checkpoints
}

/// Creates job 1 with rounds of `round_blocks` and has p0..p2 join it: round 1 opens in
/// the joins' block.
fn started_job_of(world: &mut World, round_blocks: u64) -> u64 {
    let tx = world.tx("alice", vec![any_of(&create_job(BUDGET, round_blocks))]);
    assert_ok(&world.block(vec![tx]));
    let txs = ["p0", "p1", "p2"]
        .iter()
        .map(|w| world.tx(w, vec![join(w, 1)]))
        .collect();
    assert_ok(&world.block(txs));
    let job = job(world, 1);
    assert_eq!(job.status(), pb::JobStatus::Running);
    assert_eq!(job.round, 1);
    1
}

/// Job 1 started, with rounds of [`ROUND_BLOCKS`].
fn started_job(world: &mut World) -> u64 {
    started_job_of(world, ROUND_BLOCKS)
}

/// Every worker in `workers` submits its checkpoint of `round` (weights from `weights`) in
/// one block.
fn submit_round(
    world: &mut World,
    id: u64,
    round: u64,
    workers: &[&str],
    weights: impl Fn(&str) -> String,
) -> Block {
    let txs = workers
        .iter()
        .map(|w| world.tx(w, vec![checkpoint(w, id, round, &weights(w))]))
        .collect();
    let block = world.block(txs);
    assert_ok(&block);
    block
}

/// Nothing sampled: every checkpoint is paid from the creator's budget, and none credits
/// work (only re-executed work counts for rewards and power).
#[test]
fn an_honest_job_pays_every_checkpoint_and_returns_the_rest_but_credits_no_unchecked_work() {
    let mut world = world(0);
    let alice = world.balance_of("alice");
    let hosts: Vec<u128> = ["p0", "p1", "p2"]
        .iter()
        .map(|w| world.balance_of(w))
        .collect();
    let id = started_job(&mut world);
    assert_eq!(world.balance(&gonka_pol::pool_address()), BUDGET);
    for round in 1..=ROUNDS {
        submit_round(&mut world, id, round, &["p0", "p1", "p2"], |w| {
            honest_weights(w, round)
        });
        // Closed in the block of its last checkpoint, paid in the next (nothing sampled).
        world.block(vec![]);
        for c in checkpoints(&world, id, round) {
            assert_eq!(c.status(), pb::CheckpointStatus::Accepted);
            assert_eq!(c.paid, PAY.to_string());
            assert_eq!(c.work_units, 0, "nobody re-executed it");
        }
    }
    let job = job(&world, id);
    assert_eq!(job.status(), pb::JobStatus::Completed);
    assert_eq!(job.budget_left, "0");
    assert_eq!(world.balance(&gonka_pol::pool_address()), 0);
    // Each host: two rounds' pay, minus its join and two checkpoint fees.
    for (i, w) in ["p0", "p1", "p2"].iter().enumerate() {
        assert_eq!(world.balance_of(w), hosts[i] + 2 * PAY - 3 * FEE, "{w}");
        assert_eq!(job.workers[i].rounds_paid, 2);
        assert_eq!(job.workers[i].earned, (2 * PAY).to_string());
    }
    // Alice paid the six worker pays; the unused verification fees came back.
    assert_eq!(world.balance_of("alice"), alice - 6 * PAY - FEE);
    let work = world.work(world.current_epoch());
    assert!(
        work.iter().all(|(_, units)| *units == 0),
        "unchecked training credits nothing: {work:?}"
    );
}

/// Half the checkpoints sampled: each one re-executed and found right credits its round's
/// work divided by the rate (twice it), the unsampled ones nothing, so training counts in
/// the work ledger like inference in expectation.
#[test]
fn verified_checkpoints_credit_their_work_divided_by_the_sampling_rate() {
    let mut world = world(500_000);
    let id = started_job_of(&mut world, 100);
    let mut expected: std::collections::BTreeMap<String, u64> = Default::default();
    let mut sampled = 0;
    for round in 1..=ROUNDS {
        submit_round(&mut world, id, round, &["p0", "p1", "p2"], |w| {
            honest_weights(w, round)
        });
        world.block(vec![]);
        for c in checkpoints(&world, id, round) {
            let worker = label_of(&c.worker);
            let credit = expected.entry(worker.clone()).or_default();
            if c.status() == pb::CheckpointStatus::Accepted {
                assert_eq!(c.work_units, 0);
                continue;
            }
            sampled += 1;
            let verifier = verifier_of(&world, id, round, &worker);
            let weights = honest_weights(&worker, round);
            let tx = world.tx(
                &verifier,
                vec![verdict(&verifier, id, round, &worker, &weights)],
            );
            assert_ok(&world.block(vec![tx]));
            let c = checkpoint_of(&world, id, round, &worker);
            assert_eq!(c.status(), pb::CheckpointStatus::Verified);
            assert_eq!(
                c.work_units,
                2 * UNITS,
                "{worker}: its work over the 50% rate"
            );
            *credit += 2 * UNITS;
        }
    }
    assert!(sampled > 0, "this seed samples at least one of the six");
    let work = world.work(world.current_epoch());
    for (worker, units) in expected {
        let credited = work
            .iter()
            .find(|(a, _)| *a == addr(&worker))
            .map_or(0, |(_, u)| *u);
        assert_eq!(credited, units, "{worker}");
    }
}

/// `worker` attests the final weights `weights` of job `id`.
fn publish(worker: &str, id: u64, weights: &str) -> Any {
    msg_publish_model(&addr(worker), id, &hash(weights))
}

fn trained_models(world: &World) -> Vec<gonka_proto::inference::Model> {
    world
        .query_all::<q::inference::Models>(gonka_proto::inference::QueryModelsRequest::default())
        .into_iter()
        .filter(|m| m.trained_by_job != 0)
        .collect()
}

#[test]
fn a_completed_job_publishes_its_model_once_most_workers_attest_one_hash() {
    let mut world = world(0);
    let id = started_job(&mut world);
    let tx = world.tx("p0", vec![publish("p0", id, "final")]);
    assert_code(
        world.block(vec![tx]).result(0),
        16,
        "publish before the job completed",
    );
    for round in 1..=ROUNDS {
        submit_round(&mut world, id, round, &["p0", "p1", "p2"], |w| {
            honest_weights(w, round)
        });
        world.block(vec![]);
    }
    assert_eq!(job(&world, id).status(), pb::JobStatus::Completed);

    // One attestation each for two hashes: no majority of three yet.
    let txs = vec![
        world.tx("p0", vec![publish("p0", id, "final")]),
        world.tx("p1", vec![publish("p1", id, "other")]),
    ];
    assert_ok(&world.block(txs));
    assert!(trained_models(&world).is_empty());
    assert_eq!(job(&world, id).model_id, "");
    // Refused: a host that is not a worker, a second attestation.
    let cases: Vec<(&str, Any, u32, &str)> = vec![
        (
            "p3",
            publish("p3", id, "final"),
            11,
            "attest without being a worker",
        ),
        ("p0", publish("p0", id, "final"), 17, "attest twice"),
        (
            "p0",
            publish("p0", 99, "final"),
            4,
            "attest for a job that does not exist",
        ),
    ];
    for (signer, msg, code, what) in cases {
        let tx = world.tx(signer, vec![msg]);
        assert_code(world.block(vec![tx]).result(0), code, what);
    }
    // The second attestation of "final" is two of three: the model is published.
    let tx = world.tx("p2", vec![publish("p2", id, "final")]);
    assert_ok(&world.block(vec![tx]));
    let job = job(&world, id);
    assert_eq!(job.model_id, "pol/job-1");
    assert_eq!(
        trained_models(&world),
        vec![gonka_proto::inference::Model {
            id: "pol/job-1".into(),
            price_per_token: "1".into(),
            min_vram_mib: 0,
            weights_sha256: hash("final").to_vec(),
            trained_by_job: id,
            // The reference architecture: a token of it is one work unit.
            work_per_token: 1,
            ..Default::default()
        }]
    );
    // Published once: a late attestation changes nothing.
    let tx = world.tx("p1", vec![publish("p1", id, "final")]);
    assert_code(
        world.block(vec![tx]).result(0),
        17,
        "attest after publication",
    );
    assert_eq!(job.workers[1].model_sha256, hash("other").to_vec());
    // The published model survives a genesis export and import.
    let exported = world.chain.app().export_genesis().unwrap();
    assert_eq!(exported["pol"]["jobs"][0]["model_id"], "pol/job-1");
    let (_dir, chain) = chain_from_export(&exported);
    let again = chain.app().export_genesis().unwrap();
    assert_eq!(
        again["inference"]["models"],
        exported["inference"]["models"]
    );
    assert_eq!(again["pol"], exported["pol"]);
}

/// The validator assigned to `worker`'s checkpoint of `round`.
fn verifier_of(world: &World, id: u64, round: u64, worker: &str) -> String {
    let c = checkpoint_of(world, id, round, worker);
    assert_eq!(c.status(), pb::CheckpointStatus::Verifying, "{worker}");
    let label = (0..6)
        .map(|i| format!("p{i}"))
        .find(|l| addr(l) == c.verifier)
        .unwrap();
    assert!(duties(world, &label)
        .iter()
        .any(|d| d.worker == addr(worker)));
    label
}

fn label_of(address: &str) -> String {
    (0..6)
        .map(|i| format!("p{i}"))
        .find(|l| addr(l) == address)
        .unwrap()
}

#[test]
fn a_cheating_trainer_is_faulted_by_the_committee_and_slashed_to_the_honest_side() {
    let mut world = world(1_000_000);
    // Rounds long enough that round 2 stays open through the dispute.
    let id = started_job_of(&mut world, 100);
    // p1 skips its inner steps: its weights are not what re-execution gives.
    submit_round(&mut world, id, 1, &["p0", "p1", "p2"], |w| {
        if w == "p1" {
            "stale weights".into()
        } else {
            honest_weights(w, 1)
        }
    });
    world.block(vec![]); // sampled: every checkpoint, by the 100% rate
    let honest_verifier = verifier_of(&world, id, 1, "p0");
    let accuser = verifier_of(&world, id, 1, "p1");
    assert_ne!(accuser, "p1", "a worker never verifies itself");
    let p0 = world.balance_of("p0");
    let verifier_before = world.balance_of(&honest_verifier);
    // Both validators re-execute honestly.
    let txs = vec![
        world.tx(
            &honest_verifier,
            vec![verdict(
                &honest_verifier,
                id,
                1,
                "p0",
                &honest_weights("p0", 1),
            )],
        ),
        world.tx(
            &accuser,
            vec![verdict(&accuser, id, 1, "p1", &honest_weights("p1", 1))],
        ),
        // p1 commits round 2 at once, before its round-1 checkpoint is decided.
        world.tx("p1", vec![checkpoint("p1", id, 2, "stale weights")]),
    ];
    let block = world.block(txs);
    assert_ok(&block);
    let c0 = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c0.status(), pb::CheckpointStatus::Verified);
    // p0 may itself have verified p1's checkpoint (a worker verifies others).
    let p0_fee = if accuser == "p0" { FEE } else { 0 };
    assert_eq!(world.balance_of("p0"), p0 + PAY - p0_fee);
    if honest_verifier != accuser {
        // p1 also paid for its round-2 checkpoint in this block.
        let fees = if honest_verifier == "p1" {
            2 * FEE
        } else {
            FEE
        };
        assert_eq!(
            world.balance_of(&honest_verifier),
            verifier_before + VERIFY_FEE - fees,
            "the verifier of p0 earns the fee"
        );
    }
    assert_eq!(
        checkpoint_of(&world, id, 1, "p1").status(),
        pb::CheckpointStatus::Disputed
    );
    // The committee is drawn in the next block from the validators other than p1 and the
    // accuser.
    world.block(vec![]);
    let c1 = checkpoint_of(&world, id, 1, "p1");
    assert_eq!(c1.committee.len(), 3);
    assert!(!c1.committee.contains(&addr("p1")) && !c1.committee.contains(&addr(&accuser)));
    let bonded_p1 = world.bonded("p1");
    let before: Vec<(String, u128)> = c1
        .committee
        .iter()
        .chain(std::iter::once(&addr(&accuser)))
        .map(|a| (a.clone(), world.balance(a)))
        .collect();
    // Two members re-execute: a majority against p1 decides at once.
    let members: Vec<String> = c1.committee.iter().map(|a| label_of(a)).collect();
    let txs = members[..2]
        .iter()
        .map(|m| world.tx(m, vec![verdict(m, id, 1, "p1", &honest_weights("p1", 1))]))
        .collect();
    let block = world.block(txs);
    assert_ok(&block);
    let c1 = checkpoint_of(&world, id, 1, "p1");
    assert_eq!(c1.status(), pb::CheckpointStatus::Faulted);
    assert_eq!(c1.paid, "0", "a faulted checkpoint earns nothing");
    assert_eq!(world.bonded("p1"), bonded_p1 - SLASH);
    // The slash is shared by the accuser and the two members who voted against p1; the
    // accuser also earns the verification fee.
    let share = SLASH / 3;
    for (address, balance) in before {
        let label = label_of(&address);
        let expected = if label == accuser {
            balance + share + VERIFY_FEE
        } else if members[..2].contains(&label) {
            balance + share - FEE
        } else {
            balance
        };
        assert_eq!(world.balance(&address), expected, "{label}");
    }
    // (Other checkpoints of the round, whose verifiers never answer here, may be handed to
    // it meanwhile.)
    assert!(
        !duties(&world, &members[2])
            .iter()
            .any(|d| d.worker == addr("p1") && d.round == 1),
        "the late member owes nothing for the decided dispute"
    );
    // p1 is dropped: its round-2 checkpoint no longer counts, so p0's does not close the
    // round on p2, still training; p1 cannot submit again. Round 2 closes with p0 and p2.
    assert!(!job(&world, id).workers[1].active);
    submit_round(&mut world, id, 2, &["p0"], |w| honest_weights(w, 2));
    let open = job(&world, id);
    assert_eq!((open.status(), open.round), (pb::JobStatus::Running, 2));
    assert!(
        open.workers[2].active,
        "p2 is not dropped from a round still open"
    );
    let tx = world.tx(
        "p1",
        vec![checkpoint("p1", id, 2, &honest_weights("p1", 2))],
    );
    assert_code(world.block(vec![tx]).result(0), 11, "dropped worker");
    submit_round(&mut world, id, 2, &["p2"], |w| honest_weights(w, 2));
    let done = job(&world, id);
    assert_eq!(done.status(), pb::JobStatus::Completed);
    assert!(done.workers[0].active && done.workers[2].active);
}

#[test]
fn a_false_accusation_is_upheld_and_slashes_the_accuser() {
    let mut world = world(1_000_000);
    let id = started_job(&mut world);
    submit_round(&mut world, id, 1, &["p0", "p1", "p2"], |w| {
        honest_weights(w, 1)
    });
    world.block(vec![]);
    let liar = verifier_of(&world, id, 1, "p0");
    let tx = world.tx(&liar, vec![verdict(&liar, id, 1, "p0", "made-up weights")]);
    assert_ok(&world.block(vec![tx]));
    world.block(vec![]);
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c.status(), pb::CheckpointStatus::Disputed);
    let members: Vec<String> = c.committee.iter().map(|a| label_of(a)).collect();
    let p0 = world.balance_of("p0");
    let bonded_liar = world.bonded(&liar);
    let txs = members
        .iter()
        .map(|m| world.tx(m, vec![verdict(m, id, 1, "p0", &honest_weights("p0", 1))]))
        .collect::<Vec<_>>();
    // The third vote comes after the majority decided: refused, nothing changes.
    let block = world.block(txs);
    assert_eq!(block.result(0).code, 0);
    assert_eq!(block.result(1).code, 0);
    assert_code(block.result(2), 14, "a vote after the decision");
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c.status(), pb::CheckpointStatus::Upheld);
    assert_eq!(world.bonded(&liar), bonded_liar - SLASH);
    // p0 is paid and shares the slash with the two members that voted for it.
    assert_eq!(world.balance_of("p0"), p0 + PAY + SLASH / 3);
}

#[test]
fn a_worker_that_misses_a_round_is_dropped_and_its_slot_returns_to_the_creator() {
    let mut world = world(0);
    let alice = world.balance_of("alice");
    let id = started_job(&mut world);
    let deadline = job(&world, id).round_deadline;
    // p2 never submits round 1: the round closes at its deadline.
    submit_round(&mut world, id, 1, &["p0", "p1"], |w| honest_weights(w, 1));
    while world.chain.height() < deadline {
        world.block(vec![]);
    }
    let job1 = job(&world, id);
    assert_eq!(job1.round, 2, "round 2 opened at round 1's deadline");
    assert!(!job1.workers[2].active);
    // Round 2 closes early once both active workers submitted.
    submit_round(&mut world, id, 2, &["p0", "p1"], |w| honest_weights(w, 2));
    world.block(vec![]);
    let done = job(&world, id);
    assert_eq!(done.status(), pb::JobStatus::Completed);
    // Alice paid four checkpoints; p2's two slots and every unused fee came back.
    assert_eq!(world.balance_of("alice"), alice - 4 * PAY - FEE);
    assert_eq!(world.balance(&gonka_pol::pool_address()), 0);
}

#[test]
fn a_job_that_never_fills_is_cancelled_and_refunded() {
    let mut world = world(0);
    let alice = world.balance_of("alice");
    let tx = world.tx("alice", vec![any_of(&create_job(BUDGET, ROUND_BLOCKS))]);
    assert_ok(&world.block(vec![tx]));
    let tx = world.tx("p0", vec![join("p0", 1)]);
    assert_ok(&world.block(vec![tx]));
    let deadline = job(&world, 1).formation_deadline;
    while world.chain.height() <= deadline {
        world.block(vec![]);
    }
    let cancelled = job(&world, 1);
    assert_eq!(cancelled.status(), pb::JobStatus::Cancelled);
    assert_eq!(world.balance_of("alice"), alice - FEE);
    let tx = world.tx("p1", vec![join("p1", 1)]);
    assert_code(world.block(vec![tx]).result(0), 6, "join a cancelled job");
}

/// Attack (issue 34, item 1): an unanswered verification used to count as agreement, so a
/// worker whose made-up checkpoint was sampled was paid (and credited) when its verifier
/// could not re-execute in time. Now the checkpoint goes to another validator; a late
/// answer from the one that missed is refused; and after `max_reassignments` hand-overs
/// without an answer it is unverified: unpaid, uncredited, its slot back to the creator.
#[test]
fn an_unanswered_verification_is_reassigned_and_never_pays() {
    let mut world = world(1_000_000);
    let alice = world.balance_of("alice");
    let id = started_job(&mut world);
    submit_round(&mut world, id, 1, &["p0", "p1", "p2"], |w| {
        honest_weights(w, 1)
    });
    world.block(vec![]);
    let first = checkpoint_of(&world, id, 1, "p0");
    let p0 = world.balance_of("p0");
    while world.chain.height() <= first.deadline {
        world.block(vec![]);
    }
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(
        c.status(),
        pb::CheckpointStatus::Verifying,
        "handed to another validator"
    );
    assert_eq!(c.missed_by, vec![first.verifier.clone()]);
    assert_ne!(c.verifier, first.verifier);
    assert_ne!(c.verifier, addr("p0"));
    assert_eq!(
        world.balance_of("p0"),
        p0,
        "nothing paid for an unanswered verification"
    );
    // The validator that missed it is too late now.
    let late = label_of(&first.verifier);
    let tx = world.tx(
        &late,
        vec![verdict(&late, id, 1, "p0", &honest_weights("p0", 1))],
    );
    assert_code(
        world.block(vec![tx]).result(0),
        14,
        "a verification after its deadline",
    );
    // The second validator answers: paid and credited.
    let second = label_of(&c.verifier);
    let tx = world.tx(
        &second,
        vec![verdict(&second, id, 1, "p0", &honest_weights("p0", 1))],
    );
    assert_ok(&world.block(vec![tx]));
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c.status(), pb::CheckpointStatus::Verified);
    assert_eq!(c.work_units, UNITS);
    let p0_fee = if second == "p0" { FEE } else { 0 };
    assert_eq!(world.balance_of("p0"), p0 + PAY - p0_fee);

    // p1's checkpoint: nobody ever answers. After the first validator and two more, it is
    // unverified.
    loop {
        let c = checkpoint_of(&world, id, 1, "p1");
        if c.status() != pb::CheckpointStatus::Verifying {
            break;
        }
        assert!(world.chain.height() < 60, "p1's review never ended");
        world.block(vec![]);
    }
    let c = checkpoint_of(&world, id, 1, "p1");
    assert_eq!(c.status(), pb::CheckpointStatus::Unverified);
    assert_eq!(
        c.missed_by.len(),
        3,
        "the first validator and two reassignments"
    );
    assert_eq!((c.paid.as_str(), c.work_units), ("0", 0));
    // Round 2 went unsubmitted, so the job ended; once nothing is in review the creator gets
    // back everything but p0's verified round (its pay and its verifier's fee).
    let job = job(&world, id);
    assert_ne!(job.status(), pb::JobStatus::Running);
    assert_eq!(job.checkpoints_in_review, 0);
    assert_eq!(world.balance_of("alice"), alice - FEE - SLOT);
}

#[test]
fn bad_training_messages_are_refused_with_their_codes_and_change_nothing() {
    let mut world = world(0);
    // Rounds long enough that round 1 stays open through the test.
    let id = started_job_of(&mut world, 100);
    let job_before = job(&world, id);
    let pool = world.balance(&gonka_pol::pool_address());
    // Stateless: malformed job and checkpoint.
    let mut bad = create_job(BUDGET, ROUND_BLOCKS);
    bad.dataset_root = vec![1; 5];
    let tx = world.tx_unsequenced("alice", vec![any_of(&bad)]);
    assert_code(world.block(vec![tx]).result(0), 3, "short dataset root");
    let mut short =
        pb::MsgSubmitCheckpoint::decode(checkpoint("p0", id, 1, "w").value.as_slice()).unwrap();
    short.weights_hash.truncate(31);
    let tx = world.tx_unsequenced("p0", vec![any_of(&short)]);
    assert_code(world.block(vec![tx]).result(0), 9, "31-byte hash");
    let tx = world.tx_unsequenced("p3", vec![msg_join_training(&addr("p3"), id, "ftp://x")]);
    assert_code(
        world.block(vec![tx]).result(0),
        3,
        "an endpoint that is not an http URL",
    );
    // Stateful refusals.
    let cases: Vec<(&str, Any, u32, &str)> = vec![
        ("p3", join("p3", id), 5, "join a full job"),
        ("p3", join("p3", 99), 4, "join a job that does not exist"),
        (
            "p0",
            checkpoint("p0", id, 2, "w"),
            10,
            "checkpoint for a round not open",
        ),
        (
            "p3",
            checkpoint("p3", id, 1, "w"),
            11,
            "checkpoint from a host that is not a worker",
        ),
        (
            "p3",
            verdict("p3", id, 1, "p0", "w"),
            13,
            "verify a checkpoint never submitted",
        ),
    ];
    for (signer, msg, code, what) in cases {
        let tx = world.tx(signer, vec![msg]);
        assert_code(world.block(vec![tx]).result(0), code, what);
    }
    let tx = world.tx("alice", vec![any_of(&create_job(BUDGET, ROUND_BLOCKS))]);
    assert_ok(&world.block(vec![tx]));
    let tx = world.tx("bob", vec![join("bob", 2)]);
    assert_code(world.block(vec![tx]).result(0), 8, "join without stake");
    // A duplicate checkpoint: the second in the same block is refused.
    let txs = vec![
        world.tx("p0", vec![checkpoint("p0", id, 1, "w")]),
        world.tx("p0", vec![checkpoint("p0", id, 1, "other")]),
    ];
    let block = world.block(txs);
    assert_eq!(block.result(0).code, 0);
    assert_code(block.result(1), 12, "second checkpoint of a round");
    assert_eq!(
        checkpoint_of(&world, id, 1, "p0").weights_hash,
        hash("w").to_vec()
    );
    // Nothing else moved: job 1 only gained p0's checkpoint; the pool holds both budgets.
    let job_after = job(&world, id);
    assert_eq!(job_after, job_before);
    assert_eq!(world.balance(&gonka_pol::pool_address()), pool + BUDGET);
}

#[test]
fn a_running_job_with_checkpoints_in_review_survives_genesis_export() {
    let mut world = world(1_000_000);
    let id = started_job(&mut world);
    submit_round(&mut world, id, 1, &["p0", "p1", "p2"], |w| {
        honest_weights(w, 1)
    });
    world.block(vec![]); // sampled: three checkpoints await their verifiers
    let exported = world.chain.app().export_genesis().unwrap();
    let pol = &exported["pol"];
    assert_eq!(pol["jobs"][0]["status"], pb::JobStatus::Running as i32);
    assert_eq!(pol["jobs"][0]["round"], 2);
    assert_eq!(pol["checkpoints"].as_array().unwrap().len(), 3);
    assert_eq!(pol["next_job_id"], 2);
    // The new chain checks its pool holds the budgets left, re-queues the reviews and
    // exports the same section again.
    let (_dir, chain) = chain_from_export(&exported);
    let again = chain.app().export_genesis().unwrap();
    assert_eq!(again["pol"], exported["pol"]);
}

/// Attack (issue 34, item 1): a host creates a job (its budget comes back), joins it alone
/// with dust stake and claims 10,000 inner steps of 256 sequences of 64 bytes: 164 million
/// tokens a checkpoint, which no validator re-executes within its deadline, so a sampled
/// made-up checkpoint could never be shown wrong. The job is refused (it names the most a
/// verifier re-executes in time), and a participant bonding less than `min_stake` — the
/// stake a faulted checkpoint slashes — cannot join.
#[test]
fn a_job_nobody_can_reexecute_in_time_or_a_worker_below_min_stake_is_refused() {
    let mut world = world(100_000);
    let params = gonka_pol::default_params();
    let verifiable = params.verifier_tokens_per_block * 3; // this world's 3-block deadline
    let mut huge = create_job(BUDGET, ROUND_BLOCKS);
    let config = huge.config.as_mut().unwrap();
    (config.inner_steps, config.batch_size) = (10_000, 256);
    let tx = world.tx("alice", vec![any_of(&huge)]);
    let block = world.block(vec![tx]);
    assert_code(
        block.result(0),
        3,
        "a checkpoint nobody re-executes in time",
    );
    assert!(
        block.result(0).log.contains(&format!(
            "trains 163840000 tokens (seq_len × batch_size × inner_steps), more than a verifier re-executes in verification_deadline_blocks (3) at verifier_tokens_per_block ({}): {verifiable}",
            params.verifier_tokens_per_block
        )),
        "{}",
        block.result(0).log
    );
    assert!(world
        .query::<q::pol::Jobs>(Default::default())
        .jobs
        .is_empty());

    // p5 unstakes down to half of min_stake (1,000 here) and tries to join a sound job.
    let tx = world.tx("p5", vec![unstake_msg("p5", BOND - 500)]);
    assert_ok(&world.block(vec![tx]));
    let tx = world.tx("alice", vec![any_of(&create_job(BUDGET, ROUND_BLOCKS))]);
    assert_ok(&world.block(vec![tx]));
    let tx = world.tx("p5", vec![join("p5", 1)]);
    let block = world.block(vec![tx]);
    assert_code(block.result(0), 8, "a worker below min_stake");
    assert!(
        block
            .result(0)
            .log
            .contains("bonds 500ngnk (or is jailed), less than min_stake (1000ngnk)"),
        "{}",
        block.result(0).log
    );
    assert!(job(&world, 1).workers.is_empty());
}

/// A proposer that leaves a height without a group signature chooses no verifier: the
/// checkpoints of a round closed at such a height wait, unsampled and unpaid, for the next
/// signed height; and a verifier whose deadline passed keeps its checkpoint until a seed
/// can choose the next one.
#[test]
fn checkpoint_draws_wait_for_a_height_the_group_signed() {
    let mut setup = Setup::new(6, BOND);
    setup.epoch_length = 5;
    setup.vote_extensions_from = 1;
    let mut world = World::with_genesis(setup, |state| {
        state["pol"] = json!({ "params": params(1_000_000) });
        state["bls"] = json!({"params": {"dkg_slots": 12, "dkg_deal_blocks": 2,
            "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1, "beacon_keep_blocks": 1000}});
    });
    let group = world.form_group(6);
    let id = started_job(&mut world);
    submit_round(&mut world, id, 1, &["p0", "p1", "p2"], |w| {
        honest_weights(w, 1)
    });
    for _ in 0..3 {
        let block = world.block(vec![]);
        assert!(block.events("checkpoint_sampled").is_empty());
        for c in checkpoints(&world, id, 1) {
            assert_eq!(c.status(), pb::CheckpointStatus::Closed);
            assert_eq!(c.paid, "0");
        }
    }
    let block = world.signed_block(&group, vec![]);
    assert_eq!(block.events("checkpoint_sampled").len(), 3);
    let first = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(first.status(), pb::CheckpointStatus::Verifying);
    // Nobody verifies; past the deadline, unsigned heights keep the verifier.
    while world.chain.height() <= first.deadline + 2 {
        world.block(vec![]);
    }
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c.status(), pb::CheckpointStatus::Verifying);
    assert_eq!(c.verifier, first.verifier);
    assert!(c.missed_by.is_empty());
    assert_eq!(c.deadline, world.chain.height());
    world.signed_block(&group, vec![]);
    let c = checkpoint_of(&world, id, 1, "p0");
    assert_eq!(c.missed_by, vec![first.verifier.clone()]);
    assert_ne!(
        c.verifier, first.verifier,
        "reassigned at the signed height"
    );
}
