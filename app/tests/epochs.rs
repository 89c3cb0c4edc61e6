//! Epochs through the ABCI harness: rewards by work, unbonding, slashing and jailing, the
//! Sprint power rule, rejected stake messages, invalid genesis parameters, and a property
//! test over random runs.
//!
//! Work is credited by a test-only `WorkOracle` module (see `support`), standing in for the
//! inference and disputes modules. Every block of every test goes through `World::block`,
//! which checks the supply, stake and settlement invariants after it.

mod common;
mod support;

use gonka_proto::query::{self as q, Query};
use std::collections::{BTreeMap, BTreeSet};

use gonka_proto::rewards;
use gonka_sdk::{Any, Delta};
use serde_json::json;
use support::*;

// ---------------------------------------------------------------------------------------
// Rewards

#[test]
fn rewards_split_by_work_with_fees_dust_validation_share_and_jailed_work_unpaid() {
    let mut setup = Setup::new(4, 1_000_000);
    // 1% decay: emissions 1,000,000, then 990,000, exactly.
    setup.rewards = rewards::Params {
        initial_emission: "1000000".into(),
        decay_ppb: 10_000_000,
        validation_share_ppm: 150_000,
    };
    let mut world = World::new(setup);
    let before: Vec<u128> = (0..4).map(|i| world.balance_of(&format!("p{i}"))).collect();
    let community = gonka_rewards::community_pool_address();
    let validation = gonka_rewards::validation_pool_address();

    // Epoch 0 (blocks 1-5): work 1, 2, 5, 3; p2 is then jailed; three fee-paying txs.
    let credits = world.tx(
        ORACLE,
        vec![
            credit("p0", 1),
            credit("p1", 2),
            credit("p2", 5),
            credit("p3", 3),
        ],
    );
    let send = world.tx(
        "alice",
        vec![gonka_client::msg_send(&addr("alice"), &addr("bob"), 7)],
    );
    let block = world.block(vec![credits, send]);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    let jailing = world.tx(ORACLE, vec![jail("p2")]);
    assert_eq!(world.block(vec![jailing]).result(0).code, 0);
    let closing = world.finish_epoch();
    assert_eq!(closing.closed_epoch, Some(0));

    // Fees 3 × 1,000; total 1,003,000; validation ⌊15%⌋ = 150,450; R = 852,550 over the
    // counted work 1 + 2 + 3 = 6 (p2 is jailed): ⌊R/6⌋, ⌊2R/6⌋, ⌊3R/6⌋ and 1 ngnk of dust.
    let (total, share) = (1_000_000u128 + 3 * FEE, 150_450u128);
    assert_eq!(share, total * 150_000 / 1_000_000);
    let rest = total - share;
    let expected = [rest / 6, rest * 2 / 6, 0, rest * 3 / 6];
    assert_eq!(expected, [142_091, 284_183, 0, 426_275]);
    let dust = rest - expected.iter().sum::<u128>();
    assert_eq!(dust, 1);
    for (i, amount) in expected.iter().enumerate() {
        assert_eq!(
            world.balance_of(&format!("p{i}")),
            before[i] + amount,
            "reward of p{i}"
        );
    }
    assert_eq!(world.balance(&community), dust);
    assert_eq!(world.balance(&validation), share);

    let settled = world.epoch_rewards(0);
    assert_eq!(
        settled.rewards.unwrap(),
        rewards::EpochRewards {
            epoch: 0,
            emission: "1000000".into(),
            fees: "3000".into(),
            validation_share: "150450".into(),
            distributed: "852549".into(),
            community: "1".into(),
            total_work: 6,
        }
    );
    let mut paid: Vec<(String, u64, String)> =
        [("p0", 1, 142_091), ("p1", 2, 284_183), ("p3", 3, 426_275)]
            .iter()
            .map(|(l, w, a)| (addr(l), *w, a.to_string()))
            .collect();
    paid.sort();
    let recorded: Vec<(String, u64, String)> = settled
        .participants
        .iter()
        .map(|r| (r.operator.clone(), r.work, r.amount.clone()))
        .collect();
    assert_eq!(recorded, paid);
    let event = &closing.events("rewards_settled")[0];
    assert_eq!(event["epoch"], "0");
    assert_eq!(event["emission"], "1000000ngnk");
    assert_eq!(event["fees"], "3000ngnk");
    assert_eq!(event["distributed"], "852549ngnk");
    assert_eq!(event["community"], "1ngnk");
    let rewarded: BTreeSet<String> = closing
        .events("reward")
        .iter()
        .map(|e| e["operator"].clone())
        .collect();
    assert_eq!(
        rewarded,
        ["p0", "p1", "p3"].iter().map(|l| addr(l)).collect()
    );

    // Epoch 1: decayed emission 990,000 plus one fee, all to p0 (the only work).
    let p0 = world.balance_of("p0");
    let credits = world.tx(ORACLE, vec![credit("p0", 7)]);
    world.block(vec![credits]);
    world.finish_epoch();
    let settled = world.epoch_rewards(1).rewards.unwrap();
    assert_eq!(settled.emission, "990000");
    let total = 990_000 + FEE;
    let share = total * 150_000 / 1_000_000;
    assert_eq!(world.balance_of("p0"), p0 + total - share);
    assert_eq!(world.balance(&community), dust);

    // Per-participant history and the params query.
    let history: rewards::QueryParticipantRewardsResponse =
        world.query::<q::rewards::Participant>(rewards::QueryParticipantRewardsRequest {
            operator: addr("p0"),
            ..Default::default()
        });
    let amounts: Vec<(u64, String)> = history
        .rewards
        .iter()
        .map(|r| (r.epoch, r.amount.clone()))
        .collect();
    assert_eq!(
        amounts,
        vec![(0, "142091".into()), (1, (total - share).to_string())]
    );
    let params: rewards::QueryParamsResponse =
        world.query::<q::rewards::Params>(rewards::QueryParamsRequest {});
    assert_eq!(params.params.unwrap(), world.setup.rewards);
}

#[test]
fn an_epoch_without_work_sends_everything_to_the_community_pool() {
    let mut world = World::new(Setup::new(4, 1_000_000));
    let operators: Vec<u128> = (0..4).map(|i| world.balance_of(&format!("p{i}"))).collect();
    let send = world.tx(
        "alice",
        vec![gonka_client::msg_send(&addr("alice"), &addr("bob"), 1)],
    );
    world.block(vec![send]);
    world.finish_epoch();
    let community = gonka_rewards::community_pool_address();
    assert_eq!(world.balance(&community), 1_000_000 + FEE);
    let settled = world.epoch_rewards(0);
    assert!(settled.participants.is_empty());
    let rewards = settled.rewards.unwrap();
    assert_eq!((rewards.distributed.as_str(), rewards.total_work), ("0", 0));

    // Epoch 1: work is credited and then voided in full, so again nobody earns.
    let credits = world.tx(ORACLE, vec![credit("p0", 5)]);
    world.block(vec![credits]);
    let voiding = world.tx(ORACLE, vec![void("p0", 1, 5)]);
    assert_eq!(world.block(vec![voiding]).result(0).code, 0);
    world.finish_epoch();
    assert_eq!(
        world.balance(&community),
        (1_000_000 + FEE) + (1_000_000 + 2 * FEE)
    );
    for (i, balance) in operators.iter().enumerate() {
        assert_eq!(world.balance_of(&format!("p{i}")), *balance);
    }
    assert_eq!(world.epoch_rewards(1).rewards.unwrap().community, "1002000");
}

#[test]
fn rewards_queries_answer_and_refuse_readably() {
    let mut world = World::new(Setup::new(4, 1_000_000));
    let unsettled = world.chain.query(
        q::rewards::Epoch::PATH,
        prost::Message::encode_to_vec(&rewards::QueryEpochRewardsRequest {
            epoch: 0,
            ..Default::default()
        }),
    );
    assert_eq!(
        (unsettled.codespace.as_str(), unsettled.code),
        ("rewards", 3),
        "{}",
        unsettled.log
    );
    assert!(
        unsettled.log.contains("epoch 0 are not settled")
            && unsettled.log.contains("current epoch is 0"),
        "{}",
        unsettled.log
    );
    world.finish_epoch();
    assert!(world.epoch_rewards(0).rewards.is_some());
    let bad_address = world.chain.query(
        q::rewards::Participant::PATH,
        prost::Message::encode_to_vec(&rewards::QueryParticipantRewardsRequest {
            operator: "gonka1nope".into(),
            ..Default::default()
        }),
    );
    assert_eq!(bad_address.codespace, "auth");
    assert!(bad_address.log.contains("operator"), "{}", bad_address.log);
    let nobody: rewards::QueryParticipantRewardsResponse =
        world.query::<q::rewards::Participant>(rewards::QueryParticipantRewardsRequest {
            operator: addr("bob"),
            ..Default::default()
        });
    assert!(nobody.rewards.is_empty());
}

// ---------------------------------------------------------------------------------------
// Unbonding, slashing, jailing

#[test]
fn unbonding_is_paid_at_the_end_of_epoch_current_plus_unbonding_epochs_not_earlier() {
    let mut world = World::new(Setup::new(4, 1_000_000));
    let start = world.balance_of("p0");
    let unstake = world.tx("p0", vec![unstake_msg("p0", 250_000)]);
    let block = world.block(vec![unstake]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(world.bonded("p0"), 750_000);
    let entries = world.unbonding("p0");
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (entries[0].created_epoch, entries[0].completes_epoch),
        (0, 2)
    );

    // Epoch 0 unstake, 2 unbonding epochs: paid in the last block of epoch 2 (height 15).
    let after_fee = start - FEE;
    loop {
        let block = world.block(vec![]);
        let height = world.chain.height();
        if height < 15 {
            assert_eq!(
                world.balance_of("p0"),
                after_fee,
                "paid early, at height {height}"
            );
            assert_eq!(world.unbonding("p0").len(), 1);
            assert!(block.events("unbonding_completed").is_empty());
            continue;
        }
        assert_eq!(block.closed_epoch, Some(2));
        assert_eq!(world.balance_of("p0"), after_fee + 250_000);
        assert!(world.unbonding("p0").is_empty());
        let paid = &block.events("unbonding_completed")[0];
        assert_eq!(paid["operator"], addr("p0"));
        assert_eq!(paid["amount"], "250000ngnk");
        break;
    }
}

#[test]
fn slashing_takes_the_fraction_of_bonded_and_of_each_unbonding_entry_for_the_beneficiary() {
    let mut setup = Setup::new(4, 1_000_000);
    setup.participants[0].1 = 1_000_003;
    let mut world = World::new(setup);
    let first = world.tx("p0", vec![unstake_msg("p0", 10_001)]);
    world.block(vec![first]);
    world.finish_epoch();
    let second = world.tx("p0", vec![unstake_msg("p0", 20_003)]);
    world.block(vec![second]);
    let bonded = world.bonded("p0");
    assert_eq!(bonded, 969_999);

    let beneficiary = gonka_auth::module_address("test_beneficiary");
    let fraction: u128 = 333_333;
    let cut = |amount: u128| amount * fraction / 1_000_000;
    let (from_bonded, from_first, from_second) = (cut(bonded), cut(10_001), cut(20_003));
    assert_eq!(
        (from_bonded, from_first, from_second),
        (323_332, 3_333, 6_667)
    );
    let slashing = world.tx(ORACLE, vec![slash("p0", 333_333, &beneficiary)]);
    let block = world.block(vec![slashing]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    let taken = from_bonded + from_first + from_second;
    assert_eq!(world.balance(&beneficiary), taken);
    assert_eq!(world.bonded("p0"), bonded - from_bonded);
    let entries: Vec<(u64, String)> = world
        .unbonding("p0")
        .iter()
        .map(|e| (e.completes_epoch, e.amount.clone()))
        .collect();
    assert_eq!(
        entries,
        vec![
            (2, (10_001 - from_first).to_string()),
            (3, (20_003 - from_second).to_string())
        ]
    );
    let event = block.response.tx_results[0]
        .events
        .iter()
        .find(|e| e.r#type == "slash")
        .unwrap();
    let amount = event.attributes.iter().find(|a| a.key == "amount").unwrap();
    assert_eq!(amount.value, format!("{taken}ngnk"));

    // The reduced first entry is what comes back at the end of epoch 2.
    let balance = world.balance_of("p0");
    world.finish_epoch();
    world.finish_epoch();
    assert_eq!(world.balance_of("p0"), balance + 10_001 - from_first);
}

#[test]
fn a_jailed_participant_leaves_the_set_at_once_and_cannot_stake_or_unstake_until_unjailed() {
    let mut world = World::new(Setup::new(4, 1_000_000));
    assert!(world.participant("p1").power > 0);
    let jailing = world.tx(ORACLE, vec![jail("p1")]);
    let block = world.block(vec![jailing]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(block.updates(), BTreeMap::from([(consensus_key(1), 0)]));
    let p1 = world.participant("p1");
    assert!(p1.jailed);
    assert_eq!((p1.power, p1.jailed_until_epoch), (0, 2));

    for msg in [stake_msg("p1", 5_000, None), unstake_msg("p1", 1_000)] {
        let tx = world.tx("p1", vec![msg]);
        let check = world.chain.check_tx(tx.clone());
        assert_eq!(
            (check.codespace.as_str(), check.code),
            ("stake", 6),
            "{}",
            check.log
        );
        let block = world.block(vec![tx]);
        let result = block.result(0);
        assert_eq!((result.codespace.as_str(), result.code), ("stake", 6));
        assert!(
            result.log.contains("jailed until epoch 2"),
            "{}",
            result.log
        );
        assert_eq!(world.bonded("p1"), 1_000_000);
    }
    // Work cannot be credited to it either. This is block 5, the last of epoch 0.
    let credits = world.tx(ORACLE, vec![credit("p1", 3)]);
    let closing = world.block(vec![credits]);
    assert_eq!(closing.result(0).code, 6);
    assert_eq!(closing.closed_epoch, Some(0));

    // The epoch ended without p1; unjailing is refused before epoch 2 and accepted in it.
    assert!(closing
        .updates()
        .get(&consensus_key(1))
        .is_none_or(|p| *p == 0));
    assert_eq!(world.participant("p1").power, 0);
    let early = world.tx("p1", vec![unjail_msg("p1")]);
    let block = world.block(vec![early]);
    assert_eq!(
        (block.result(0).codespace.as_str(), block.result(0).code),
        ("stake", 9)
    );
    assert!(
        block.result(0).log.contains("current epoch is 1"),
        "{}",
        block.result(0).log
    );
    world.finish_epoch();
    let unjail = world.tx("p1", vec![unjail_msg("p1")]);
    assert_eq!(world.block(vec![unjail]).result(0).code, 0);
    assert!(!world.participant("p1").jailed);
    let closing = world.finish_epoch();
    let back = closing.updates()[&consensus_key(1)];
    assert!(back > 0);
    assert_eq!(world.participant("p1").power, back);
}

/// Jailing the only validator must not hand CometBFT an empty validator set (CometBFT stops
/// the chain on one). `update_powers` keeps the set when nobody is eligible, but stake's
/// `end_block` zeroes every jailed validator unconditionally.
#[test]
fn jailing_the_last_validator_keeps_a_validator_set() {
    let mut world = World::new(Setup::new(1, 1_000_000));
    assert_eq!(world.participant("p0").power, 1_000_000);
    let jailing = world.tx(ORACLE, vec![jail("p0")]);
    let block = world.block(vec![jailing]);
    assert_eq!(block.result(0).code, 0);
    assert_ne!(
        block.updates().get(&consensus_key(0)),
        Some(&0),
        "the only validator was removed from the set"
    );
}

// ---------------------------------------------------------------------------------------
// Supply over a busy multi-epoch run

#[test]
fn supply_invariant_holds_after_every_block_and_grows_only_by_emission() {
    let mut setup = Setup::new(5, 2_000_000);
    setup.participants[4].1 = 9_000_000;
    setup.rewards = rewards::Params {
        validation_share_ppm: 100_000,
        ..gonka_rewards::default_params()
    };
    setup.accounts.push(("newcomer".into(), FUNDS));
    let mut world = World::new(setup);
    let genesis_supply = world.supply();
    let mut emitted = Vec::new();
    let beneficiary = gonka_rewards::community_pool_address();
    for step in 0u64..30 {
        let mut txs = vec![world.tx(
            ORACLE,
            vec![
                // p3 is jailed from step 9 to 21, and work cannot be credited to it then.
                credit(&format!("p{}", [0, 1, 2, 4][step as usize % 4]), 10 + step),
                credit(&format!("p{}", [0, 1, 2, 4][(step as usize + 2) % 4]), 3),
            ],
        )];
        txs.push(world.tx(
            "alice",
            vec![gonka_client::msg_send(
                &addr("alice"),
                &addr("bob"),
                100 + u128::from(step),
            )],
        ));
        match step {
            2 => txs.push(world.tx("p1", vec![unstake_msg("p1", 500_000)])),
            4 => txs.push(world.tx(
                "newcomer",
                vec![stake_msg("newcomer", 3_000_000, Some(consensus_key(40)))],
            )),
            7 => txs.push(world.tx(ORACLE, vec![slash("p4", 250_000, &beneficiary)])),
            9 => txs.push(world.tx(ORACLE, vec![jail("p3")])),
            12 => txs.push(world.tx("p2", vec![stake_msg("p2", 1_234_567, None)])),
            16 => txs.push(world.tx(ORACLE, vec![slash("p1", 500_000, &addr("bob"))])),
            21 => txs.push(world.tx("p3", vec![unjail_msg("p3")])),
            _ => {}
        }
        let block = world.block(txs);
        for (i, result) in block.response.tx_results.iter().enumerate() {
            assert_eq!(result.code, 0, "step {step} tx {i}: {}", result.log);
        }
        if let Some(epoch) = block.closed_epoch {
            emitted.push((epoch, world.epoch_rewards(epoch).rewards.unwrap().emission));
        }
    }
    // Six epochs of 5 blocks closed (heights 5..30); the default emission decays by
    // 474,970 ppb per epoch: epoch 1 mints exactly ⌊323·10^12 · (1 − 474970/10^9)⌋.
    assert_eq!(emitted.len(), 6);
    assert_eq!(emitted[0], (0, "323000000000000".to_string()));
    assert_eq!(emitted[1], (1, "322846584690000".to_string()));
    let total: u128 = emitted
        .iter()
        .map(|(_, e)| e.parse::<u128>().unwrap())
        .sum();
    assert_eq!(world.supply(), genesis_supply + total);
    assert!(world.balance(&gonka_rewards::validation_pool_address()) > 0);
}

// ---------------------------------------------------------------------------------------
// The Sprint power rule

#[test]
fn validator_power_follows_the_documented_blend_fallback_and_cap() {
    let mut setup = Setup::new(4, 0);
    for (i, stake) in [100_000, 200_000, 300_000, 400_000].into_iter().enumerate() {
        setup.participants[i].1 = stake;
    }
    let mut world = World::new(setup);
    let params = world.setup.stake.clone();
    let operators: Vec<String> = (0..4).map(|i| addr(&format!("p{i}"))).collect();
    let powers = |world: &World| -> Vec<i64> {
        let all = world.powers();
        operators.iter().map(|o| all[o]).collect()
    };
    // Genesis: stake only (10/20/30/40%), capped at 30% with the excess re-spread 1:2.
    assert_eq!(powers(&world), vec![133_333, 266_666, 300_000, 300_000]);

    // Epoch 0: all work by p0. Weights 91/2/3/4 %; p0 capped, then p3 in a second round.
    let credits = world.tx(ORACLE, vec![credit("p0", 100)]);
    world.block(vec![credits]);
    let closing = world.finish_epoch();
    let expected = vec![300_000, 159_999, 240_000, 300_000];
    assert_eq!(powers(&world), expected);
    let work = BTreeMap::from([(operators[0].clone(), 100)]);
    let derived = expected_powers(&world.participants(), Some(&work), &params).unwrap();
    assert_eq!(
        operators.iter().map(|o| derived[o]).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(
        closing.updates(),
        BTreeMap::from([
            (consensus_key(0), 300_000),
            (consensus_key(1), 159_999),
            (consensus_key(2), 240_000),
        ]),
        "only changed powers are sent, p3 stays at 300,000"
    );

    // Epoch 1 without work: the stake-only fallback restores the genesis powers.
    let closing = world.finish_epoch();
    assert_eq!(powers(&world), vec![133_333, 266_666, 300_000, 300_000]);
    assert_eq!(
        closing.updates(),
        BTreeMap::from([
            (consensus_key(0), 133_333),
            (consensus_key(1), 266_666),
            (consensus_key(2), 300_000),
        ])
    );

    // Epoch 2, equal work: 10% of stake share + 90% of 25%, below the cap, no re-spreading.
    let credits = world.tx(
        ORACLE,
        (0..4).map(|i| credit(&format!("p{i}"), 25)).collect(),
    );
    world.block(vec![credits]);
    let closing = world.finish_epoch();
    let expected = vec![235_000, 245_000, 255_000, 265_000];
    assert_eq!(powers(&world), expected);
    let updates = closing.updates();
    for (i, power) in expected.iter().enumerate() {
        assert_eq!(updates[&consensus_key(i)], *power);
    }
    assert!(expected.iter().all(|p| *p <= 300_000));
}

#[test]
fn power_cap_is_skipped_when_the_set_is_too_small_for_it() {
    // Three validators cannot all stay under 30%: the documented rule skips the cap.
    let mut setup = Setup::new(3, 0);
    for (i, stake) in [100_000, 100_000, 800_000].into_iter().enumerate() {
        setup.participants[i].1 = stake;
    }
    let world = World::new(setup);
    let all = world.powers();
    let powers: Vec<i64> = (0..3).map(|i| all[&addr(&format!("p{i}"))]).collect();
    assert_eq!(powers, vec![100_000, 100_000, 800_000]);
}

// ---------------------------------------------------------------------------------------
// Rejected stake messages

struct Case {
    name: &'static str,
    signer: &'static str,
    msg: Any,
    /// Fails a stateless check: no fee, no sequence, no state change at all.
    stateless: bool,
    codespace: &'static str,
    code: u32,
    log: &'static str,
}

fn stake_with_moniker(operator: &str, moniker: &str) -> Any {
    Any {
        type_url: "/gonka.stake.v1.MsgStake".into(),
        value: prost::Message::encode_to_vec(&gonka_proto::stake::MsgStake {
            operator: addr(operator),
            amount: "5000".into(),
            moniker: moniker.into(),
            consensus_pubkey: Vec::new(),
        }),
    }
}

fn bad_input_cases() -> Vec<Case> {
    let case = |name, signer, msg, stateless, codespace, code, log| Case {
        name,
        signer,
        msg,
        stateless,
        codespace,
        code,
        log,
    };
    vec![
        case(
            "first stake below min_stake",
            "outsider",
            stake_msg("outsider", 999, None),
            false,
            "stake",
            3,
            "at least 1000ngnk",
        ),
        case(
            "unstake more than bonded",
            "p0",
            unstake_msg("p0", 1_000_001),
            false,
            "stake",
            4,
            "has 1000000ngnk bonded",
        ),
        case(
            "stake without the funds",
            "poor",
            stake_msg("poor", 1_000_000, None),
            false,
            "bank",
            4,
            "holds",
        ),
        case(
            "consensus key of another participant",
            "outsider",
            stake_msg("outsider", 5_000, Some(consensus_key(1))),
            false,
            "stake",
            5,
            "already used by participant",
        ),
        case(
            "stake while jailed",
            "p3",
            stake_msg("p3", 5_000, None),
            false,
            "stake",
            6,
            "jailed until epoch 2",
        ),
        case(
            "unstake by an unknown participant",
            "outsider",
            unstake_msg("outsider", 1),
            false,
            "stake",
            7,
            "is not a participant",
        ),
        case(
            "changing the consensus key",
            "p0",
            stake_msg("p0", 5_000, Some(consensus_key(99))),
            false,
            "stake",
            8,
            "cannot be changed",
        ),
        case(
            "unjail when not jailed",
            "p0",
            unjail_msg("p0"),
            false,
            "stake",
            9,
            "is not jailed",
        ),
        case(
            "moniker too long",
            "p0",
            stake_with_moniker("p0", &"m".repeat(65)),
            true,
            "stake",
            10,
            "at most 64 characters",
        ),
        case(
            "void more work than credited",
            ORACLE,
            void("p0", 0, 1),
            false,
            "stake",
            11,
            "only 0 were credited",
        ),
        case(
            "slash fraction above one",
            ORACLE,
            slash("p0", 1_000_001, &addr("bob")),
            false,
            "stake",
            12,
            "exceeds",
        ),
        case(
            "zero amount",
            "p0",
            stake_msg("p0", 0, None),
            true,
            "bank",
            3,
            "must be positive",
        ),
    ]
}

#[test]
fn bad_stake_messages_have_their_own_codes_and_change_nothing_but_the_fee() {
    let cases = bad_input_cases();
    let mut seen = BTreeSet::new();
    for case in &cases {
        assert!(
            seen.insert((case.codespace, case.code)),
            "{} shares its code",
            case.name
        );
    }
    let mut setup = Setup::new(4, 1_000_000);
    setup.accounts.push(("outsider".into(), FUNDS));
    setup.accounts.push(("poor".into(), 5 * FEE + 10));
    // `reference` gets the same blocks, except that each rejected tx is replaced by a
    // self-send of 1 ngnk by the same signer (which changes nothing but fee and sequence) or,
    // for a stateless rejection, by nothing.
    let mut world = World::new(setup.clone());
    let mut reference = World::new(setup);
    for chain in [&mut world, &mut reference] {
        let jailing = chain.tx(ORACLE, vec![jail("p3")]);
        assert_eq!(chain.block(vec![jailing]).result(0).code, 0);
    }
    assert_eq!(world.chain.app_hash(), reference.chain.app_hash());

    // Participants as the rejected messages could have changed them (powers change at
    // epoch ends regardless).
    let stakes = |world: &World| -> Vec<_> {
        world
            .participants()
            .into_iter()
            .map(|p| gonka_proto::stake::Participant { power: 0, ..p })
            .collect()
    };
    for case in &cases {
        let participants = stakes(&world);
        let unbonding = world.unbonding("p0");
        let balance = world.balance_of(case.signer);
        let tx = if case.stateless {
            world.tx_unsequenced(case.signer, vec![case.msg.clone()])
        } else {
            world.tx(case.signer, vec![case.msg.clone()])
        };
        let check = world.chain.check_tx(tx.clone());
        assert_eq!(
            (check.codespace.as_str(), check.code),
            (case.codespace, case.code),
            "CheckTx {}: {}",
            case.name,
            check.log
        );
        let block = world.block(vec![tx]);
        let result = block.result(0);
        assert_eq!(
            (result.codespace.as_str(), result.code),
            (case.codespace, case.code),
            "FinalizeBlock {}: {}",
            case.name,
            result.log
        );
        assert!(
            result.log.contains(case.log),
            "{}: log {:?}",
            case.name,
            result.log
        );

        let txs = if case.stateless {
            vec![]
        } else {
            let me = addr(case.signer);
            vec![reference.tx(case.signer, vec![gonka_client::msg_send(&me, &me, 1)])]
        };
        let reference_block = reference.block(txs);
        assert!(reference_block
            .response
            .tx_results
            .iter()
            .all(|r| r.code == 0));
        assert_eq!(
            world.chain.app_hash(),
            reference.chain.app_hash(),
            "{} changed state beyond the fee",
            case.name
        );
        assert_eq!(stakes(&world), participants, "{}", case.name);
        assert_eq!(world.unbonding("p0"), unbonding, "{}", case.name);
        let fee = if case.stateless { 0 } else { FEE };
        assert_eq!(
            world.balance_of(case.signer),
            balance - fee,
            "{}",
            case.name
        );
    }
}

// ---------------------------------------------------------------------------------------
// Invalid genesis

#[test]
fn invalid_genesis_parameters_are_refused_naming_the_parameter() {
    let dir = state_dir();
    let store = gonka_store::Store::open(&dir.path().join("state.redb")).unwrap();
    let modules = gonka_app::modules::all();
    let module = |name: &str| modules.iter().find(|m| m.name() == name).unwrap();
    let with = |value: serde_json::Value, field: &str, bad: serde_json::Value| {
        let mut params = value;
        params[field] = bad;
        json!({ "params": params })
    };
    let stake = serde_json::to_value(gonka_stake::default_params()).unwrap();
    let rewards = serde_json::to_value(gonka_rewards::default_params()).unwrap();

    // A valid genesis (every section at its defaults) imports, so the failures below are
    // the parameters' doing.
    let mut ok = Delta::new(&store);
    for m in &modules {
        m.init_genesis_json(&mut ok, None).unwrap();
    }

    let cases = [
        (
            "rewards",
            with(rewards.clone(), "decay_ppb", json!(1_000_000_000)),
            "rewards",
            "app_state.rewards.params.decay_ppb must be below 1000000000",
        ),
        (
            "rewards",
            with(rewards.clone(), "validation_share_ppm", json!(1_000_001)),
            "rewards",
            "app_state.rewards.params.validation_share_ppm",
        ),
        (
            "rewards",
            with(rewards.clone(), "initial_emission", json!("-5")),
            "rewards",
            "app_state.rewards.params.initial_emission",
        ),
        (
            "rewards",
            json!({"params": 5}),
            "sdk",
            "app_state.rewards is malformed",
        ),
        (
            "stake",
            with(stake.clone(), "min_stake", json!("0")),
            "stake",
            "app_state.stake.params.min_stake",
        ),
        (
            "stake",
            with(stake.clone(), "stake_weight_ppm", json!(1_000_001)),
            "stake",
            "app_state.stake.params.stake_weight_ppm",
        ),
        (
            "stake",
            with(stake.clone(), "max_power_share_ppm", json!(0)),
            "stake",
            "app_state.stake.params.max_power_share_ppm",
        ),
        (
            "epochs",
            json!({"params": {"epoch_length": 0}}),
            "epochs",
            "app_state.epochs.params.epoch_length",
        ),
        (
            "auth",
            json!({"params": {"max_tx_bytes": 0, "max_msgs_per_tx": 1, "min_gas_price": "1"}}),
            "auth",
            "max_tx_bytes",
        ),
        (
            "bank",
            json!({"balances": [{"address": "gonka1bad", "coins": []}]}),
            "auth",
            "app_state.bank.balances[].address",
        ),
        (
            "stake",
            json!({"unbondings": [{"operator": addr("p0"), "amount": "-5"}]}),
            "sdk",
            "app_state.stake.unbondings[].amount",
        ),
    ];
    for (name, section, codespace, expected) in cases {
        let mut state = Delta::new(&store);
        let err = module(name)
            .init_genesis_json(&mut state, Some(&section))
            .unwrap_err();
        assert_eq!(err.codespace, codespace, "{name}: {}", err.log);
        assert!(
            err.log.contains(expected),
            "{name}: {:?} does not name {expected:?}",
            err.log
        );
    }
}

// ---------------------------------------------------------------------------------------
// Property test

/// One random run: random genesis stakes and parameters, then random work credits and
/// voids, stakes, unstakes, slashes, jailings and unjailings over 10 epochs. `World::block`
/// checks supply, stake invariants, settlement and the power cap after every block; here the
/// powers after every epoch are also compared with the documented rule.
fn random_run(seed: u64, stats: &mut BTreeMap<&'static str, u64>) {
    let mut rng = Rng::new(seed);
    let n = rng.range(3, 6) as usize;
    let mut setup = Setup::new(n, 0);
    setup.epoch_length = rng.range(2, 4);
    setup.stake.min_stake = "1000000".into();
    setup.stake.stake_weight_ppm = rng.range(0, 1_000_000);
    setup.stake.max_power_share_ppm = *rng.pick(&[250_000, 300_000, 500_000, 1_000_000]);
    // At least the 8 blocks of the disputes' challenge window (genesis requires it).
    setup.stake.unbonding_epochs = rng.range(4, 7);
    setup.stake.jail_epochs = rng.range(0, 2);
    for participant in &mut setup.participants {
        participant.1 = u128::from(rng.range(1_000_000, 20_000_000));
    }
    setup.rewards = rewards::Params {
        initial_emission: rng.range(0, 1_000_000_000_000).to_string(),
        decay_ppb: rng.range(0, 100_000_000),
        validation_share_ppm: if rng.chance(50) {
            0
        } else {
            rng.range(0, 1_000_000)
        },
    };
    setup.accounts.push(("q0".into(), FUNDS));
    setup.accounts.push(("q1".into(), FUNDS));
    let labels: Vec<String> = (0..n)
        .map(|i| format!("p{i}"))
        .chain(["q0".to_string(), "q1".to_string()])
        .collect();
    let mut world = World::new(setup);
    let params = world.setup.stake.clone();
    let blocks = 10 * world.setup.epoch_length;

    for _ in 0..blocks {
        let (mut txs, mut kinds) = (Vec::new(), Vec::new());
        for _ in 0..rng.range(0, 4) {
            let label = rng.pick(&labels).clone();
            let epoch = world.current_epoch();
            let (kind, signer, msg) = match rng.range(0, 9) {
                0..=2 => (
                    "credit",
                    ORACLE.to_string(),
                    credit(&label, rng.range(0, 1_000)),
                ),
                3 => (
                    "void",
                    ORACLE.to_string(),
                    void(
                        &label,
                        epoch.saturating_sub(rng.range(0, 1)),
                        rng.range(0, 300),
                    ),
                ),
                4 => {
                    let key = rng
                        .chance(50)
                        .then(|| consensus_key(rng.range(0, n as u64 + 2) as usize));
                    (
                        "stake",
                        label.clone(),
                        stake_msg(&label, u128::from(rng.range(1, 3_000_000)), key),
                    )
                }
                5 => (
                    "unstake",
                    label.clone(),
                    unstake_msg(&label, u128::from(rng.range(1, 10_000_000))),
                ),
                6 => {
                    let fraction = if rng.chance(10) {
                        1_000_001
                    } else {
                        rng.range(0, 1_000_000)
                    };
                    let beneficiary: &String = rng.pick(&labels);
                    let beneficiary = addr(beneficiary);
                    (
                        "slash",
                        ORACLE.to_string(),
                        slash(&label, fraction, &beneficiary),
                    )
                }
                7 => ("jail", ORACLE.to_string(), jail(&label)),
                _ => ("unjail", label.clone(), unjail_msg(&label)),
            };
            kinds.push(kind);
            txs.push(world.tx(&signer, vec![msg]));
        }
        let powers_before = world.powers();
        let block = world.block(txs);
        for (kind, result) in kinds.iter().zip(&block.response.tx_results) {
            // Every tx is well-formed and funded: only the module may refuse it.
            assert_ne!(result.codespace, "auth", "seed {seed}: {}", result.log);
            let outcome = if result.code == 0 { "ok" } else { "rejected" };
            *stats.entry(outcome).or_default() += 1;
            if result.code == 0 {
                *stats.entry(kind).or_default() += 1;
            }
        }
        *stats.entry("unbonding paid").or_default() +=
            block.events("unbonding_completed").len() as u64;
        let Some(epoch) = block.closed_epoch else {
            continue;
        };
        let participants = world.participants();
        let work: BTreeMap<String, u64> = world.work(epoch).into_iter().collect();
        let powers = world.powers();
        let settled = world.epoch_rewards(epoch).rewards.unwrap();
        *stats
            .entry(if settled.total_work > 0 {
                "epochs with work"
            } else {
                "epochs without work"
            })
            .or_default() += 1;
        let capped =
            eligible(&participants, &params).len() as u64 * params.max_power_share_ppm >= 1_000_000;
        *stats
            .entry(if capped {
                "epochs with the cap"
            } else {
                "epochs without the cap"
            })
            .or_default() += 1;
        match expected_powers(&participants, Some(&work), &params) {
            Some(expected) => assert_eq!(powers, expected, "seed {seed}, epoch {epoch}"),
            // Nobody eligible: the set is left as it was (jailings of this block aside).
            None => {
                for (operator, power) in &powers {
                    let before = powers_before.get(operator).copied().unwrap_or(0);
                    assert!(*power == before || *power == 0, "seed {seed}: {operator}");
                }
            }
        }
        let updates = block.updates();
        for p in &participants {
            let before = powers_before.get(&p.operator).copied().unwrap_or(0);
            if p.consensus_pubkey.len() == 32 && p.power != before {
                let key: [u8; 32] = p.consensus_pubkey.as_slice().try_into().unwrap();
                assert_eq!(
                    updates.get(&key),
                    Some(&p.power),
                    "seed {seed}: update of {}",
                    p.operator
                );
            }
        }
        assert!(powers.values().map(|p| *p as u128).sum::<u128>() <= TOTAL_POWER);
    }
}

#[test]
fn property_random_runs_keep_supply_stake_rewards_and_power_invariants() {
    let mut stats = BTreeMap::new();
    for seed in 1..=30 {
        random_run(seed, &mut stats);
    }
    println!("{stats:#?}");
    // The runs must actually exercise what they claim to: every action succeeds (and is
    // rejected) many times, and epochs with and without work and the cap all occur.
    for what in [
        "ok",
        "rejected",
        "credit",
        "void",
        "stake",
        "unstake",
        "slash",
        "jail",
        "unjail",
        "unbonding paid",
        "epochs with work",
        "epochs without work",
        "epochs with the cap",
        "epochs without the cap",
    ] {
        assert!(
            stats.get(what).copied().unwrap_or(0) >= 5,
            "too few {what}: {stats:?}"
        );
    }
}
