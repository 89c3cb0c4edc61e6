//! Simulation (not a timing benchmark): hosts serving inferences over many epochs through the
//! real modules in the in-process harness, some of them cheating (faking a share of their
//! work records), everyone validating and voting honestly and on time. Every block goes
//! through the test `World`, which checks the supply and stake invariants after each block
//! and the rewards settlement at each epoch end.
//!
//! For each scenario it prints: the share of cheaters caught and how many epochs that took,
//! the cheaters' net gain from cheating (what the attack earned them minus stake slashed and
//! refunds paid; it must be negative), the honest participants slashed (must be zero), and
//! the compute spent on re-execution (validations and committee votes) as a share of all
//! compute.
//!
//! Attacks (each cheater attacks with the scenario's rate from the first epoch on and never
//! stops; otherwise every participant answers honestly and on time):
//! - **fake answers**: a host signs a wrong answer instead of computing (saves half the
//!   record's price in compute);
//! - **inflated tokens**: a host computes honestly but claims 50% more prompt tokens (the
//!   requester pays them; validators recount);
//! - **framing**: a validator reports a mismatch against an honest executor, hoping the
//!   committee slashes it and shares the slash;
//! - **withholding TA**: the transfer agent stops serving the request bodies of some records
//!   (so their work can never be checked); validators and committees report it;
//! - **self-dealing**: a host is its own requester: it pays itself for fake records (no
//!   compute, no real user) to be credited work, hence emission and power; its gain is its
//!   epoch rewards' share earned by the fake work;
//! - **lazy validators**: validators that never re-execute (saving half the record's price
//!   in compute each time). As assigned validators they can only commit something they did
//!   not compute (the answer is hidden until their commit is in); on a committee they copy
//!   the answer the reveal made public. Their gain is the compute saved, plus slash shares,
//!   minus their stake slashed (validation rewards are left out, which overstates the gain);
//! - **steady state**: no cheater, enough epochs for every host to reach the 1% sampling
//!   floor: what verification costs once reputations have settled.
//!
//! Executing a record costs its host half the record's price in compute.
//!
//! Run: `cargo bench -p gonka-app --bench dispute_sim` (release; about a minute).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use gonka_proto::query as q;
use std::collections::{BTreeMap, BTreeSet};

use common::key;
use gonka_client::disputes::{
    msg_report_payload_unavailable, msg_reveal_output, msg_submit_validation, msg_vote_dispute,
    msg_vote_payload_unavailable,
};
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
/// The steady-state run: epochs and records per host per epoch (2,000 records per host).
const STEADY_EPOCHS: u64 = 20;
const STEADY_RECORDS_PER_HOST: usize = 100;
/// Tokens per record and the price per token.
const TOKENS: u64 = 100;
const PRICE: u128 = 10;
/// Bonded stake of every host.
const BOND: u128 = 10_000_000;

/// What the cheaters do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Attack {
    FakeAnswers,
    InflatedTokens,
    Framing,
    WithholdingTa,
    SelfDealing,
    LazyValidators,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::FakeAnswers => "fake answers",
            Attack::InflatedTokens => "inflated tokens",
            Attack::Framing => "framing",
            Attack::WithholdingTa => "withholding TA",
            Attack::SelfDealing => "self-dealing host",
            Attack::LazyValidators => "lazy validators",
        }
    }
}

/// One scenario: what the cheaters do, how many of the hosts cheat (for a withholding TA:
/// the TA p0 alone) and how often, for how long.
struct Scenario {
    attack: Attack,
    cheater_percent: usize,
    cheat_rate_percent: u64,
    epochs: u64,
    records_per_host: usize,
}

/// What a scenario yielded.
#[derive(Default)]
struct Outcome {
    cheaters: usize,
    caught: usize,
    epochs_to_catch: Vec<u64>,
    cheater_gain: i128,
    /// What the cheaters earned by attacking, before their losses.
    attack_income: u128,
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
    // A 17-block challenge window: within the 2-epoch (20-block) unbonding.
    let params = pb::Params {
        dispute_deadline_blocks: 5,
        validation_deadline_blocks: 5,
        reveal_deadline_blocks: 5,
        dispute_window_blocks: 5,
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

/// What the simulation knows of one record.
struct Facts {
    truth: [u8; 32],
    /// The answer the executor committed to (the truth or a lie) and its salt, which the TA
    /// reveals when the chain asks.
    claimed: [u8; 32],
    salt: [u8; 32],
    /// The token counts a correct re-execution finds.
    tokens: (u64, u64),
    /// The transfer agent does not serve its body.
    withheld: bool,
}

fn run(scenario: &Scenario) -> Outcome {
    let mut w = world();
    let attack = scenario.attack;
    let mut rng = Rng::new(
        scenario.cheater_percent as u64 * 1_000 + scenario.cheat_rate_percent + attack as u64,
    );
    let cheaters: BTreeSet<String> = match attack {
        Attack::WithholdingTa if scenario.cheat_rate_percent > 0 => [addr("p0")].into(),
        Attack::WithholdingTa => BTreeSet::new(),
        _ => (0..HOSTS * scenario.cheater_percent / 100)
            .map(|k| addr(&host(HOSTS - 1 - k)))
            .collect(),
    };
    let mut out = Outcome {
        cheaters: cheaters.len(),
        ..Default::default()
    };
    let mut facts: BTreeMap<String, Facts> = BTreeMap::new();
    let mut first_caught: BTreeMap<String, u64> = BTreeMap::new();
    // What each cheater earned by the attack itself (compute saved, tokens overcharged).
    let mut earned: BTreeMap<String, u128> = BTreeMap::new();
    // Self-dealing: work units faked per (host, epoch), and the rewards paid per (host, epoch)
    // with the work they were paid for.
    let mut faked_units: BTreeMap<(String, u64), u128> = BTreeMap::new();
    let mut rewarded: BTreeMap<(String, u64), (u128, u128)> = BTreeMap::new();
    let labels: Vec<String> = (0..HOSTS).map(host).collect();
    let record_price = u128::from(TOKENS) * PRICE;
    let honest_tokens = (TOKENS / 2, TOKENS / 2);
    let mut nonce = 0u64;

    let start_epoch = w.current_epoch();
    while w.current_epoch() < start_epoch + scenario.epochs {
        let epoch = w.current_epoch();
        // First block of the epoch's work: every host serves its records.
        let mut records = Vec::new();
        for i in 0..HOSTS {
            let cheater = cheaters.contains(&addr(&host(i)));
            for _ in 0..scenario.records_per_host {
                nonce += 1;
                let tag = format!("r{nonce}");
                let attacks = cheater && rng.chance(scenario.cheat_rate_percent);
                let (label, node) = (host(i), format!("n{i}"));
                // Signed below with this bench's own `node_key(i)`, not a seeded key.
                let on = exec(&label, &node, 0);
                let mut input = request("p0", &tag, MODEL, on, honest_tokens, 0);
                let mut withheld = false;
                match attack {
                    Attack::FakeAnswers if attacks => {
                        input.response_hash = lie(&tag);
                        *earned.entry(addr(&label)).or_default() += record_price / 2;
                    }
                    Attack::InflatedTokens if attacks => {
                        input.prompt_tokens += TOKENS / 4;
                        *earned.entry(addr(&label)).or_default() += u128::from(TOKENS / 4) * PRICE;
                    }
                    Attack::WithholdingTa => {
                        withheld = rng.chance(scenario.cheat_rate_percent);
                    }
                    Attack::SelfDealing if attacks => {
                        input.response_hash = lie(&tag);
                        *faked_units.entry((addr(&label), epoch)).or_default() +=
                            u128::from(TOKENS);
                    }
                    _ => {}
                }
                // A self-dealing host signs its fake requests itself.
                let requester = if attack == Attack::SelfDealing && attacks {
                    key(&label)
                } else {
                    key("alice")
                };
                let record = signed_work_record(requester, &node_key(i), &input).unwrap();
                facts.insert(
                    record.inference_id.clone(),
                    Facts {
                        truth: truth(&tag),
                        claimed: input.response_hash,
                        salt: input.salt,
                        tokens: honest_tokens,
                        withheld,
                    },
                );
                out.records += 1;
                let faked = match attack {
                    Attack::FakeAnswers | Attack::InflatedTokens | Attack::SelfDealing => attacks,
                    Attack::WithholdingTa => withheld,
                    Attack::Framing | Attack::LazyValidators => false,
                };
                if faked {
                    out.faked += 1;
                }
                if !(matches!(attack, Attack::FakeAnswers | Attack::SelfDealing) && attacks) {
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
        for r in &block.response.tx_results {
            assert_eq!(r.code, 0, "work batch refused: {} {}", r.codespace, r.log);
        }
        // The rest of the epoch: everyone answers what it owes, one message per tx (a vote
        // on a dispute decided earlier in the block fails alone).
        loop {
            for event in events(&block) {
                match event.r#type.as_str() {
                    "validation_sampled" => out.sampled += 1,
                    "dispute_opened" => out.disputes += 1,
                    "reward" => {
                        let work: u128 = attr(event, "work").parse().unwrap_or(0);
                        let epoch: u64 = attr(event, "epoch").parse().unwrap_or(0);
                        rewarded.insert(
                            (attr(event, "operator").to_string(), epoch),
                            (ngnk(attr(event, "amount")), work),
                        );
                    }
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
            // The TA reveals every output the chain asks for, except the records whose
            // bodies it withholds (it dropped them).
            let due = w.query_all::<q::disputes::RevealsDue>(pb::QueryRevealsDueRequest {
                transfer_agent: addr("p0"),
                ..Default::default()
            });
            let reveals: Vec<_> = due
                .iter()
                .filter(|d| !facts[&d.inference_id].withheld)
                .map(|d| {
                    let fact = &facts[&d.inference_id];
                    msg_reveal_output(&addr("p0"), &d.inference_id, &fact.salt, &fact.claimed)
                })
                .collect();
            for chunk in reveals.chunks(16) {
                txs.push(w.tx("p0", chunk.to_vec()));
            }
            for label in &labels {
                let owed = w.query_all::<q::disputes::Pending>(pb::QueryPendingRequest {
                    validator: addr(label),
                    ..Default::default()
                });
                let framer = attack == Attack::Framing && cheaters.contains(&addr(label));
                let lazy = attack == Attack::LazyValidators && cheaters.contains(&addr(label));
                for item in owed {
                    let fact = &facts[&item.inference_id];
                    let validation = item.kind == "validation";
                    let msg = if fact.withheld {
                        // Nobody gets the body: the TA withheld it.
                        if validation {
                            msg_report_payload_unavailable(&addr(label), &item.inference_id)
                        } else {
                            msg_vote_payload_unavailable(&addr(label), item.dispute_id)
                        }
                    } else if lazy {
                        // No re-execution: a guess as validator (the answer is hidden until
                        // the commit), the revealed answer copied on a committee.
                        *earned.entry(addr(label)).or_default() += record_price / 2;
                        out.faked += 1;
                        if validation {
                            let guess = found(lie(&item.inference_id), honest_tokens);
                            msg_submit_validation(&addr(label), &item.inference_id, &guess)
                        } else {
                            let copy = found(fact.claimed, honest_tokens);
                            msg_vote_dispute(&addr(label), item.dispute_id, &copy)
                        }
                    } else {
                        out.reexecuted_tokens += u128::from(TOKENS);
                        // A framer accuses the executor of the records it validates.
                        let frames =
                            framer && validation && rng.chance(scenario.cheat_rate_percent);
                        let answer = if frames {
                            lie(&item.inference_id)
                        } else {
                            fact.truth
                        };
                        if frames {
                            out.faked += 1;
                        }
                        let result = found(answer, fact.tokens);
                        if validation {
                            msg_submit_validation(&addr(label), &item.inference_id, &result)
                        } else {
                            msg_vote_dispute(&addr(label), item.dispute_id, &result)
                        }
                    };
                    txs.push(w.tx(label, vec![msg]));
                }
            }
            let n_reveals = reveals.chunks(16).count();
            block = w.block(txs);
            for r in &block.response.tx_results[..n_reveals] {
                assert_eq!(r.code, 0, "reveal refused: {} {}", r.codespace, r.log);
            }
        }
    }

    // Cheaters' gains and losses, from the chain's dispute records: stake slashed, refunds
    // paid back (they come from the host's balance first), slash shares received.
    let disputes = w.query_all::<q::disputes::List>(pb::QueryDisputesRequest::default());
    let mut gained: BTreeMap<String, i128> = BTreeMap::new();
    for d in &disputes {
        if !d.slashed.is_empty() {
            *gained.entry(d.slashed.clone()).or_default() -= ngnk(&d.slashed_amount) as i128;
        }
        for payout in &d.payouts {
            match payout.reason.as_str() {
                // A self-dealing host refunds itself: no loss.
                "refund" if d.status == "executor_faulted" && payout.to != d.executor_host => {
                    *gained.entry(d.executor_host.clone()).or_default() -=
                        ngnk(&payout.amount) as i128;
                }
                "slash_share" => {
                    *gained.entry(payout.to.clone()).or_default() += ngnk(&payout.amount) as i128;
                }
                _ => {}
            }
        }
    }
    // The self-dealers' income: the share of each epoch's reward paid for their fake work.
    for ((host, epoch), units) in &faked_units {
        if let Some((amount, work)) = rewarded.get(&(host.clone(), *epoch)) {
            if *work > 0 {
                *earned.entry(host.clone()).or_default() += amount * (*units).min(*work) / work;
            }
        }
    }
    for cheater in &cheaters {
        let attack_income = earned.get(cheater).copied().unwrap_or(0);
        out.attack_income += attack_income;
        let attack_income = attack_income as i128;
        out.cheater_gain += attack_income + gained.get(cheater).copied().unwrap_or(0);
    }
    out.caught = first_caught.len();
    out.epochs_to_catch = first_caught
        .values()
        .map(|epoch| epoch - start_epoch + 1)
        .collect();
    out
}

fn main() {
    let attack = |attack, cheater_percent, cheat_rate_percent| Scenario {
        attack,
        cheater_percent,
        cheat_rate_percent,
        epochs: EPOCHS,
        records_per_host: RECORDS_PER_HOST,
    };
    // A host that fakes one record in five is sampled at the 1% floor once its streak has
    // grown: its rows run three times as long, so the run (one deterministic run, not an
    // expectation) sees it caught.
    let rare = |kind, cheater_percent, cheat_rate_percent| Scenario {
        epochs: 3 * EPOCHS,
        ..attack(kind, cheater_percent, cheat_rate_percent)
    };
    let scenarios = [
        attack(Attack::FakeAnswers, 0, 0),
        rare(Attack::FakeAnswers, 10, 20),
        attack(Attack::FakeAnswers, 10, 100),
        rare(Attack::FakeAnswers, 30, 20),
        attack(Attack::FakeAnswers, 30, 100),
        rare(Attack::InflatedTokens, 10, 20),
        attack(Attack::InflatedTokens, 30, 100),
        attack(Attack::Framing, 10, 100),
        attack(Attack::Framing, 30, 50),
        attack(Attack::WithholdingTa, 0, 20),
        attack(Attack::SelfDealing, 10, 50),
        attack(Attack::SelfDealing, 30, 100),
        attack(Attack::LazyValidators, 30, 100),
        Scenario {
            attack: Attack::FakeAnswers,
            cheater_percent: 0,
            cheat_rate_percent: 0,
            epochs: STEADY_EPOCHS,
            records_per_host: STEADY_RECORDS_PER_HOST,
        },
    ];
    println!(
        "{HOSTS} hosts, {EPOCH_LENGTH}-block epochs, bond {BOND} ngnk, record price {} ngnk; default sampling 1%-10%",
        u128::from(TOKENS) * PRICE
    );
    println!(
        "| attack | cheaters | rate | epochs x records/host | records | attacks | sampled | disputes | caught | epochs to catch (mean / max) | attack income (ngnk) | cheaters' net gain (ngnk) | honest slashed | re-execution share |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
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
        let name = if o.cheaters == 0 && scenario.records_per_host == STEADY_RECORDS_PER_HOST {
            "steady state"
        } else if o.cheaters == 0 {
            "none"
        } else {
            scenario.attack.name()
        };
        println!(
            "| {name} | {} | {}% | {} x {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {:.2}% |",
            o.cheaters,
            scenario.cheat_rate_percent,
            scenario.epochs,
            scenario.records_per_host,
            o.records,
            o.faked,
            o.sampled,
            o.disputes,
            o.caught,
            o.cheaters,
            catch,
            o.attack_income,
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
