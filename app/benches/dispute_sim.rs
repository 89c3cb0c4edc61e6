//! Simulation (not a timing benchmark): hosts serving inferences over many epochs through the
//! real modules in the in-process harness, some of them cheating (faking a share of their
//! work records), everyone validating and voting honestly and on time. Every block goes
//! through the test `World`, which checks the supply and stake invariants after each block
//! and the rewards settlement at each epoch end.
//!
//! For each scenario it prints: the share of cheaters caught and how many epochs that took,
//! the cheaters' net gain from cheating (compute saved on faked records minus stake slashed
//! and refunds paid; it must be negative), the honest participants slashed (must be zero),
//! and the compute spent on re-execution (validations and committee votes) as a share of all
//! compute.
//!
//! Assumptions: executing a record costs its host half the record's price in compute (a
//! faked record costs nothing); cheaters fake each of their records with the scenario's
//! rate from the first epoch on and never stop; as validators and committee members they
//! answer honestly (lazy executors, not a colluding cartel).
//!
//! Run: `cargo bench -p gonka-app --bench dispute_sim` (release; about a minute).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use gonka_proto::query as q;
use std::collections::{BTreeMap, BTreeSet};

use common::key;
use gonka_client::disputes::{msg_submit_validation, msg_vote_dispute};
use gonka_client::tx::{
    msg_register_node, msg_register_transfer_agent, msg_submit_work_batch, node_key_proof,
    signed_work_record, NodeSpec,
};
use gonka_proto::disputes as pb;
use k256::ecdsa::SigningKey;
use serde_json::json;
use support::{addr, exec, found, lie, request, truth, Block, Rng, Setup, World, CHAIN_ID};
use tendermint_proto::v0_38::abci::Event;

const MODEL: &str = "sim/model";
/// Hosts (participants p0..), each with one ML node; p0 is also the transfer agent.
const HOSTS: usize = 20;
const EPOCHS: u64 = 10;
const EPOCH_LENGTH: u64 = 10;
/// Records each host serves per epoch.
const RECORDS_PER_HOST: usize = 10;
/// Tokens per record and the price per token.
const TOKENS: u64 = 100;
const PRICE: u128 = 10;
/// Bonded stake of every host.
const BOND: u128 = 10_000_000;

/// One scenario: how many hosts cheat and how often.
struct Scenario {
    cheater_percent: usize,
    cheat_rate_percent: u64,
}

/// What a scenario yielded.
#[derive(Default)]
struct Outcome {
    cheaters: usize,
    caught: usize,
    epochs_to_catch: Vec<u64>,
    cheater_gain: i128,
    honest_slashed: usize,
    executed_tokens: u128,
    reexecuted_tokens: u128,
    records: usize,
    faked: usize,
    sampled: usize,
    disputes: usize,
}

fn node_key(host: usize) -> SigningKey {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(host as u64 + 1).to_be_bytes());
    SigningKey::from_slice(&seed).unwrap()
}

fn host(i: usize) -> String {
    format!("p{i}")
}

fn events(block: &Block) -> Vec<&Event> {
    block
        .response
        .events
        .iter()
        .chain(block.response.tx_results.iter().flat_map(|r| &r.events))
        .collect()
}

fn attr<'a>(event: &'a Event, key: &str) -> &'a str {
    event
        .attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| a.value.as_str())
        .unwrap_or_default()
}

fn ngnk(value: &str) -> u128 {
    value.trim_end_matches("ngnk").parse().unwrap_or(0)
}

fn world() -> World {
    let mut setup = Setup::new(HOSTS, BOND);
    setup.epoch_length = EPOCH_LENGTH;
    setup.rewards.validation_share_ppm = 100_000;
    let params = pb::Params {
        dispute_deadline_blocks: 5,
        validation_deadline_blocks: 5,
        ..gonka_disputes::default_params()
    };
    let mut world = World::with_genesis(setup, |state| {
        state["inference"] = json!({
            "params": {"max_records_per_batch": 100, "max_tokens_per_record": 100000, "payload_retention_blocks": 1000},
            "models": [{"id": MODEL, "price_per_token": PRICE.to_string(), "min_vram_mib": 0}],
        });
        state["disputes"] = json!({ "params": params });
    });
    let mut txs = vec![world.tx(
        "p0",
        vec![msg_register_transfer_agent(
            &addr("p0"),
            "https://ta.example",
            &key("p0").public_key().to_bytes(),
        )],
    )];
    for i in 0..HOSTS {
        let node_id = format!("n{i}");
        let spec = NodeSpec {
            key_proof: node_key_proof(&node_key(i), CHAIN_ID, &addr(&host(i)), &node_id),
            node_id,
            models: vec![MODEL.into()],
            vram_mib: 1,
            bandwidth_mbps: 1,
            max_concurrency: 1,
            endpoint: "http://127.0.0.1:9000".into(),
            pubkey: node_key(i)
                .verifying_key()
                .to_encoded_point(true)
                .as_bytes()
                .to_vec(),
        };
        txs.push(world.tx(&host(i), vec![msg_register_node(&addr(&host(i)), &spec)]));
    }
    let block = world.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    world
}

fn run(scenario: &Scenario) -> Outcome {
    let mut w = world();
    let mut rng = Rng::new(scenario.cheater_percent as u64 * 1_000 + scenario.cheat_rate_percent);
    let cheaters: BTreeSet<String> = (0..HOSTS * scenario.cheater_percent / 100)
        .map(|k| addr(&host(HOSTS - 1 - k)))
        .collect();
    let mut out = Outcome {
        cheaters: cheaters.len(),
        ..Default::default()
    };
    // Facts the simulation knows about each record: the truth and its tokens.
    let mut truths: BTreeMap<String, [u8; 32]> = BTreeMap::new();
    let mut first_caught: BTreeMap<String, u64> = BTreeMap::new();
    let mut faked_of: BTreeMap<String, u128> = BTreeMap::new();
    let labels: Vec<String> = (0..HOSTS).map(host).collect();
    let mut nonce = 0u64;

    let start_epoch = w.current_epoch();
    while w.current_epoch() < start_epoch + EPOCHS {
        let epoch = w.current_epoch();
        // First block of the epoch's work: every host serves its records.
        let mut records = Vec::new();
        for i in 0..HOSTS {
            let cheater = cheaters.contains(&addr(&host(i)));
            for _ in 0..RECORDS_PER_HOST {
                nonce += 1;
                let tag = format!("r{nonce}");
                let fake = cheater && rng.chance(scenario.cheat_rate_percent);
                let (label, node) = (host(i), format!("n{i}"));
                // Signed below with this bench's own `node_key(i)`, not a seeded key.
                let on = exec(&label, &node, 0);
                let mut input = request("p0", &tag, MODEL, on, (TOKENS / 2, TOKENS / 2), 0);
                if fake {
                    input.response_hash = lie(&tag);
                }
                let record = signed_work_record(key("alice"), &node_key(i), &input).unwrap();
                truths.insert(record.inference_id.clone(), truth(&tag));
                out.records += 1;
                if fake {
                    out.faked += 1;
                    *faked_of.entry(addr(&host(i))).or_default() += 1;
                } else {
                    out.executed_tokens += u128::from(TOKENS);
                }
                records.push(record);
            }
        }
        let txs: Vec<Vec<u8>> = records
            .chunks(100)
            .map(|chunk| {
                w.tx(
                    "p0",
                    vec![msg_submit_work_batch(&addr("p0"), chunk.to_vec())],
                )
            })
            .collect();
        let mut block = w.block(txs);
        assert!(block.response.tx_results.iter().all(|r| r.code == 0));
        // The rest of the epoch: everyone answers what it owes, one message per tx (a vote
        // on a dispute decided earlier in the block fails alone).
        loop {
            for event in events(&block) {
                match event.r#type.as_str() {
                    "validation_sampled" => out.sampled += 1,
                    "dispute_opened" => out.disputes += 1,
                    "dispute_slashed" => {
                        let operator = attr(event, "operator").to_string();
                        if cheaters.contains(&operator) {
                            first_caught.entry(operator).or_insert(epoch);
                        } else {
                            out.honest_slashed += 1;
                        }
                    }
                    _ => {}
                }
            }
            if block.closed_epoch.is_some() {
                break;
            }
            let mut txs = Vec::new();
            for label in &labels {
                let owed = w.query_all::<q::disputes::Pending>(pb::QueryPendingRequest {
                    validator: addr(label),
                    ..Default::default()
                });
                for item in owed {
                    let result = &found(truths[&item.inference_id], (TOKENS / 2, TOKENS / 2));
                    out.reexecuted_tokens += u128::from(TOKENS);
                    let msg = if item.kind == "validation" {
                        msg_submit_validation(&addr(label), &item.inference_id, result)
                    } else {
                        msg_vote_dispute(&addr(label), item.dispute_id, result)
                    };
                    txs.push(w.tx(label, vec![msg]));
                }
            }
            block = w.block(txs);
        }
    }

    // Losses of cheaters, from the chain's dispute records: stake slashed and refunds of
    // records the host paid back (refunds come from its balance first).
    let disputes = w.query_all::<q::disputes::List>(pb::QueryDisputesRequest {
        status: "executor_faulted".into(),
        ..Default::default()
    });
    let mut losses: BTreeMap<String, u128> = BTreeMap::new();
    for d in &disputes {
        let loss = losses.entry(d.executor_host.clone()).or_default();
        *loss += ngnk(&d.slashed_amount);
        *loss += d
            .payouts
            .iter()
            .filter(|p| p.reason == "refund")
            .map(|p| ngnk(&p.amount))
            .sum::<u128>();
    }
    let record_price = u128::from(TOKENS) * PRICE;
    for cheater in &cheaters {
        // Compute saved: half the price of every faked record.
        let saved = faked_of.get(cheater).copied().unwrap_or(0) * record_price / 2;
        let lost = losses.get(cheater).copied().unwrap_or(0);
        out.cheater_gain += saved as i128 - lost as i128;
    }
    out.caught = first_caught.len();
    out.epochs_to_catch = first_caught
        .values()
        .map(|epoch| epoch - start_epoch + 1)
        .collect();
    out
}

fn main() {
    let scenarios = [(0, 0), (10, 20), (10, 100), (30, 20), (30, 100)].map(
        |(cheater_percent, cheat_rate_percent)| Scenario {
            cheater_percent,
            cheat_rate_percent,
        },
    );
    println!(
        "{HOSTS} hosts, {EPOCHS} epochs of {EPOCH_LENGTH} blocks, {RECORDS_PER_HOST} records per host per epoch, \
         bond {BOND} ngnk, record price {} ngnk; default sampling 1%-10%",
        u128::from(TOKENS) * PRICE
    );
    println!(
        "| cheaters | cheat rate | records | faked | sampled | disputes | caught | epochs to catch (mean / max) | cheaters' net gain (ngnk) | honest slashed | re-execution share |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for scenario in &scenarios {
        let o = run(scenario);
        let catch = if o.epochs_to_catch.is_empty() {
            "-".to_string()
        } else {
            let sum: u64 = o.epochs_to_catch.iter().sum();
            format!(
                "{:.1} / {}",
                sum as f64 / o.epochs_to_catch.len() as f64,
                o.epochs_to_catch.iter().max().unwrap()
            )
        };
        let share =
            100.0 * o.reexecuted_tokens as f64 / (o.executed_tokens + o.reexecuted_tokens) as f64;
        println!(
            "| {}% ({}) | {}% | {} | {} | {} | {} | {}/{} | {} | {} | {} | {:.2}% |",
            scenario.cheater_percent,
            o.cheaters,
            scenario.cheat_rate_percent,
            o.records,
            o.faked,
            o.sampled,
            o.disputes,
            o.caught,
            o.cheaters,
            catch,
            o.cheater_gain,
            o.honest_slashed,
            share
        );
        assert_eq!(o.honest_slashed, 0, "an honest participant was slashed");
        if o.cheaters > 0 && o.faked > 0 {
            assert!(o.cheater_gain < 0, "cheating paid off: {}", o.cheater_gain);
        }
    }
}
