//! Genesis export: the state of a running chain, exported as `app_state`, starts a new chain
//! that exports the very same `app_state` again, with the same supply, balances, bonds,
//! jailing, unbonding entries and inference registry.

mod common;
mod support;

use gonka_app::harness::TestChain;
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
    let dir = state_dir();
    let mut new = TestChain::with_modules(
        &dir.path().join("state.redb"),
        "gonka-next",
        &exported,
        modules(),
    )
    .unwrap();
    new.next_block(vec![]);
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
