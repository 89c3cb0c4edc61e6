//! Genesis export: the state of a running chain, exported as `app_state`, starts a new chain
//! that exports the very same `app_state` again, with the same supply, balances, bonds,
//! jailing, unbonding entries, inference registry and settlement escrows and pending batches.

mod common;
mod support;

use gonka_client::settlement::{cosign, msg_open_escrow, msg_settle_batch, Batch, Served};
use gonka_client::tx::msg_register_node;
use serde_json::{json, Value};
use support::*;

const MODEL: &str = "meta/llama-8b";

/// A chain that has moved: sends, a new participant, an unbonding, a jailing, an ML node and
/// a transfer agent, and an epoch boundary.
fn moved_world() -> World {
    let mut setup = Setup::new(4, 1_000_000);
    setup.epoch_length = 5;
    setup.stake.unbonding_epochs = 3;
    let mut w = World::with_genesis(setup, |state| {
        state["inference"]["models"] =
            json!([{"id": MODEL, "price_per_token": "10", "min_vram_mib": 16000}]);
    });
    let txs = vec![
        w.tx(
            "alice",
            vec![gonka_client::msg_send(
                &addr("alice"),
                &addr("carol"),
                12_345,
            )],
        ),
        w.tx("bob", vec![stake_msg("bob", 2_000_000, None)]),
        w.tx("p1", vec![unstake_msg("p1", 100_000)]),
        w.tx(ORACLE, vec![jail("p2")]),
        w.tx("p0", vec![register_ta("p0", "https://ta.example")]),
        w.tx(
            "p3",
            vec![msg_register_node(
                &addr("p3"),
                &node_spec("p3", "n-3", &[MODEL], 24_000, 3),
            )],
        ),
    ];
    let block = w.block(txs);
    for index in 0..6 {
        assert_eq!(
            block.result(index).code,
            0,
            "tx {index}: {}",
            block.result(index).log
        );
    }
    // Settlement: alice escrows for the TA p0, which settles one record run on p3's node
    // (p3 co-signs); the batch is still in its window at the export.
    let p3_bls = gonka_client::bls::account_bls_key(crate::common::key("p3"));
    let txs = vec![
        w.tx(
            "alice",
            vec![msg_open_escrow(&addr("alice"), &addr("p0"), 50_000, 1_000)],
        ),
        w.tx(
            "p3",
            vec![gonka_client::bls::msg_register_bls_key(
                &addr("p3"),
                CHAIN_ID,
                &p3_bls,
            )],
        ),
    ];
    let block = w.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    let record = work_record(
        "alice",
        "p0",
        "e1",
        MODEL,
        exec("p3", "n-3", 3),
        (10, 10),
        7,
    );
    let batch = Batch::build(
        &addr("p0"),
        1,
        vec![Served {
            record,
            host: addr("p3"),
            cost: 200,
            work_per_token: 0,
        }],
    )
    .unwrap();
    let signed = batch.signed(&[cosign(&p3_bls, CHAIN_ID, &batch.msg)]);
    let tx = w.tx("p0", vec![msg_settle_batch(&signed)]);
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    w.finish_epoch();
    w
}

#[test]
fn an_exported_genesis_starts_a_chain_that_exports_the_same_genesis() {
    let old = moved_world();
    assert!(
        old.current_epoch() >= 1,
        "the scenario crosses an epoch boundary"
    );
    let exported = old.chain.app().export_genesis().unwrap();

    // What the export carries, read back from the JSON.
    let stake = &exported["stake"];
    let p2 = participant_entry(stake, &addr("p2"));
    assert_eq!(p2["jailed"], true, "{p2}");
    let unbondings = stake["unbondings"].as_array().unwrap();
    assert_eq!(unbondings.len(), 1, "{stake}");
    assert_eq!(unbondings[0]["operator"], addr("p1"));
    assert_eq!(unbondings[0]["amount"], "100000");
    assert_eq!(
        participant_entry(stake, &addr("bob"))["amount"],
        "2000000",
        "{stake}"
    );
    assert_eq!(exported["inference"]["nodes"][0]["id"], "n-3");
    let settlement = &exported["settlement"];
    assert_eq!(settlement["escrows"][0]["balance"], "49793", "{settlement}");
    assert_eq!(settlement["batches"][0]["settled"]["total"], "207");
    assert_eq!(settlement["batch_numbers"][0]["number"], 1);
    assert_eq!(
        exported["inference"]["transfer_agents"][0]["address"],
        addr("p0")
    );
    let bank_addresses: Vec<&str> = exported["bank"]["balances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .collect();
    assert!(bank_addresses.contains(&addr("carol").as_str()));
    for pool in [
        gonka_stake::bonded_pool_address(),
        gonka_stake::unbonding_pool_address(),
    ] {
        assert!(
            !bank_addresses.contains(&pool.as_str()),
            "the stake pools are minted again by the stake section, not carried by bank"
        );
    }

    // A new chain from the export: same supply, same balances, same bonds.
    let (_dir, new) = chain_from_export(&exported);
    let again = new.app().export_genesis().unwrap();
    assert_eq!(again, exported, "import then export is the identity");

    let store = new.app().store();
    use gonka_bank::BankRead;
    use gonka_stake::StakeRead;
    assert_eq!(store.supply("ngnk").unwrap(), old.supply());
    for label in ["alice", "bob", "carol", "p0", "p1"] {
        assert_eq!(
            store.balance(&addr(label), "ngnk").unwrap(),
            old.balance_of(label),
            "{label}"
        );
    }
    for old_participant in old.participants() {
        let moved = store
            .participant(&old_participant.operator)
            .unwrap()
            .unwrap();
        assert_eq!(moved.bonded, old_participant.bonded);
        assert_eq!(moved.jailed, old_participant.jailed);
    }
    let entry = &store.unbonding_entries().unwrap()[0];
    let old_entry = &old.unbonding("p1")[0];
    assert_eq!(
        entry.completes_epoch,
        old_entry.completes_epoch - old.current_epoch(),
        "epoch numbers restart at 0"
    );
    gonka_stake::check_invariants(store).unwrap();
}

fn participant_entry<'a>(stake: &'a Value, operator: &str) -> &'a Value {
    stake["participants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["operator"] == operator)
        .unwrap_or_else(|| panic!("{operator} not in {stake}"))
}
