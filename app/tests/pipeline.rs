//! The transaction pipeline through the ABCI calls: every rejection has its own code in
//! CheckTx and FinalizeBlock and changes no balance; execution failures pay only the fee.

mod common;

use common::*;
use gonka_app::harness::TestChain;
use gonka_client::{sign, GasFee, SignerData};
use gonka_proto::bank::{Coin, MsgSend};
use gonka_sdk::Any;
use prost::Message;

fn any_send(from: &str, to: &str, amount: &str) -> Any {
    Any {
        type_url: "/gonka.bank.v1.MsgSend".into(),
        value: MsgSend {
            from_address: from.into(),
            to_address: to.into(),
            amount: vec![Coin {
                denom: "ngnk".into(),
                amount: amount.into(),
            }],
        }
        .encode_to_vec(),
    }
}

fn signed(from: &str, msgs: Vec<Any>, signer: SignerData, fee: GasFee, memo: &str) -> Vec<u8> {
    sign(key(from), msgs, &signer, fee, memo).unwrap()
}

struct Case {
    name: &'static str,
    tx: Vec<u8>,
    codespace: &'static str,
    code: u32,
}

fn rejection_cases() -> Vec<Case> {
    let alice = key("alice");
    let bob = key("bob");
    let mut bad_signature = send("alice", "bob", 10, 0);
    let last = bad_signature.len() - 1;
    bad_signature[last] ^= 0x01;
    let case = |name, tx, codespace, code| Case {
        name,
        tx,
        codespace,
        code,
    };
    vec![
        case("malformed bytes", b"\x0a\xffnot a tx".to_vec(), "auth", 2),
        case(
            "unknown message type",
            signed(
                "alice",
                vec![Any {
                    type_url: "/gonka.nope.v1.MsgNope".into(),
                    value: vec![],
                }],
                signer("alice", 0),
                tx_fee(),
                "",
            ),
            "auth",
            3,
        ),
        case("bad signature", bad_signature, "auth", 4),
        case(
            "wrong chain-id",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "10")],
                SignerData {
                    chain_id: "other-chain".into(),
                    ..signer("alice", 0)
                },
                tx_fee(),
                "",
            ),
            "auth",
            5,
        ),
        case(
            "wrong account number",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "10")],
                SignerData {
                    account_number: 7,
                    ..signer("alice", 0)
                },
                tx_fee(),
                "",
            ),
            "auth",
            6,
        ),
        case("future sequence", send("alice", "bob", 10, 5), "auth", 8),
        case(
            "fee below minimum",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "10")],
                signer("alice", 0),
                GasFee {
                    amount: MIN_FEE - 1,
                    ..tx_fee()
                },
                "",
            ),
            "auth",
            9,
        ),
        case(
            "oversized tx",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "10")],
                signer("alice", 0),
                tx_fee(),
                &"x".repeat(9000),
            ),
            "auth",
            10,
        ),
        case(
            "invalid bech32 address",
            signed(
                "alice",
                vec![any_send(alice.address(), "gonka1notanaddress", "10")],
                signer("alice", 0),
                tx_fee(),
                "",
            ),
            "auth",
            12,
        ),
        case(
            "zero amount",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "0")],
                signer("alice", 0),
                tx_fee(),
                "",
            ),
            "bank",
            3,
        ),
        case(
            "overflowing amount",
            signed(
                "alice",
                vec![any_send(
                    alice.address(),
                    bob.address(),
                    "340282366920938463463374607431768211456",
                )],
                signer("alice", 0),
                tx_fee(),
                "",
            ),
            "sdk",
            4,
        ),
        case(
            "gas limit below the cost of the tx's own bytes",
            signed(
                "alice",
                vec![any_send(alice.address(), bob.address(), "10")],
                signer("alice", 0),
                GasFee {
                    gas_limit: 100,
                    amount: MIN_FEE,
                },
                "",
            ),
            "sdk",
            11,
        ),
        case(
            "insufficient funds for the fee",
            send("carol", "bob", 1, 0),
            "bank",
            4,
        ),
    ]
}

#[test]
fn every_rejection_has_its_own_code_in_check_and_finalize_and_changes_nothing() {
    let cases = rejection_cases();
    let mut seen = std::collections::BTreeSet::new();
    for case in &cases {
        assert!(
            seen.insert((case.codespace, case.code)),
            "{} shares its code",
            case.name
        );
    }
    let mut fx = Fixture::new();
    fx.chain.next_block(vec![]);
    let addresses = ["alice", "bob", "carol"].map(|l| key(l).address().to_string());
    let before: Vec<u128> = addresses.iter().map(|a| fx.balance(a)).collect();
    let hash_before = fx.chain.app_hash();

    for case in &cases {
        let check = fx.chain.check_tx(case.tx.clone());
        assert_eq!(
            (check.codespace.as_str(), check.code),
            (case.codespace, case.code),
            "CheckTx {}: {}",
            case.name,
            check.log
        );
        assert!(!check.log.is_empty(), "CheckTx {} has no log", case.name);
    }
    let block = fx
        .chain
        .next_block(cases.iter().map(|c| c.tx.clone()).collect());
    assert_eq!(block.tx_results.len(), cases.len());
    for (case, result) in cases.iter().zip(&block.tx_results) {
        assert_eq!(
            (result.codespace.as_str(), result.code),
            (case.codespace, case.code),
            "FinalizeBlock {}: {}",
            case.name,
            result.log
        );
        assert!(!result.log.is_empty());
    }
    let after: Vec<u128> = addresses.iter().map(|a| fx.balance(a)).collect();
    assert_eq!(before, after, "a rejected tx moved funds");
    // Rejected txs leave the state, and so the app hash, exactly as an empty block would.
    let mut reference = Fixture::new();
    reference.chain.next_block(vec![]);
    reference.chain.next_block(vec![]);
    assert_eq!(fx.chain.app_hash(), reference.chain.app_hash());
    assert_ne!(hash_before, [0; 32]);
}

#[test]
fn replayed_tx_is_rejected_after_inclusion() {
    let mut fx = Fixture::new();
    let tx = send("alice", "bob", 10, 0);
    let first = fx.chain.next_block(vec![tx.clone()]);
    assert_eq!(first.tx_results[0].code, 0, "{}", first.tx_results[0].log);
    let alice = fx.balance(key("alice").address());
    let check = fx.chain.check_tx(tx.clone());
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("auth", 7),
        "{}",
        check.log
    );
    let replay = fx.chain.next_block(vec![tx]);
    assert_eq!(replay.tx_results[0].code, 7);
    assert_eq!(fx.balance(key("alice").address()), alice);
}

#[test]
fn failed_execution_pays_only_the_fee() {
    let mut fx = Fixture::new();
    let (alice, bob) = (key("alice"), key("bob"));
    let too_much = send("alice", "bob", START_BALANCE, 0);
    let check = fx.chain.check_tx(too_much.clone());
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("bank", 4),
        "{}",
        check.log
    );
    let block = fx.chain.next_block(vec![too_much]);
    assert_eq!(block.tx_results[0].code, 4, "{}", block.tx_results[0].log);
    assert!(
        block.tx_results[0].log.contains("holds"),
        "{}",
        block.tx_results[0].log
    );
    assert_eq!(fx.balance(alice.address()), START_BALANCE - MIN_FEE);
    assert_eq!(fx.balance(bob.address()), START_BALANCE);
    // The sequence was used: the next tx must carry sequence 1.
    let next = fx.chain.next_block(vec![send("alice", "bob", 5, 1)]);
    assert_eq!(next.tx_results[0].code, 0, "{}", next.tx_results[0].log);
    assert_eq!(fx.balance(bob.address()), START_BALANCE + 5);
}

#[test]
fn send_moves_funds_pays_fee_and_emits_events() {
    let mut fx = Fixture::new();
    let (alice, bob) = (key("alice"), key("bob"));
    let block = fx.chain.next_block(vec![
        send("alice", "bob", 250, 0),
        send("alice", "bob", 50, 1),
    ]);
    for result in &block.tx_results {
        assert_eq!(result.code, 0, "{}", result.log);
        let kinds: Vec<_> = result.events.iter().map(|e| e.r#type.as_str()).collect();
        assert!(
            kinds.contains(&"transfer") && kinds.contains(&"tx") && kinds.contains(&"message"),
            "{kinds:?}"
        );
    }
    assert_eq!(
        fx.balance(alice.address()),
        START_BALANCE - 300 - 2 * MIN_FEE
    );
    assert_eq!(fx.balance(bob.address()), START_BALANCE + 300);
    assert_eq!(
        fx.balance(&gonka_bank::fee_collector_address()),
        2 * MIN_FEE
    );
}

#[test]
fn check_state_queues_sequences_and_resets_at_commit() {
    let mut fx = Fixture::new();
    fx.chain.next_block(vec![]);
    for sequence in 0..3 {
        let check = fx.chain.check_tx(send("alice", "bob", 1, sequence));
        assert_eq!(check.code, 0, "sequence {sequence}: {}", check.log);
    }
    // Sequence 3 cannot be accepted twice.
    assert_eq!(fx.chain.check_tx(send("alice", "bob", 1, 2)).code, 7);
    // The block includes only sequence 0; after commit the check state follows the chain,
    // so sequence 1 is next again (CometBFT rechecks the rest of the mempool).
    fx.chain.next_block(vec![send("alice", "bob", 1, 0)]);
    assert_eq!(fx.chain.check_tx(send("alice", "bob", 1, 1)).code, 0);
    assert_eq!(fx.chain.check_tx(send("alice", "bob", 1, 3)).code, 8);
}

#[test]
fn reopened_chain_resumes_at_last_commit() {
    let fx = Fixture::new();
    let path = fx.dir.path().join("state.redb");
    let mut chain = fx.chain;
    chain.next_block(vec![send("alice", "bob", 7, 0)]);
    let hash = chain.app_hash();
    drop(chain);
    let chain = TestChain::reopen(&path).unwrap();
    assert_eq!((chain.height(), chain.app_hash()), (1, hash));
}
