//! x/bls through the in-process harness: registering, rotating and querying participants'
//! BLS keys, and every refusal with its code and no state change.

mod common;
mod support;

use gonka_bls_crypto::{PublicKey, SecretKey};
use gonka_client::bls::msg_register_bls_key;
use gonka_proto::bls as pb;
use gonka_proto::query::bls as q;
use gonka_proto::signing::bls_pop_bytes;
use gonka_sdk::Any;
use prost::Message;
use support::*;

fn world() -> World {
    World::new(Setup::new(3, 1_000_000))
}

fn bls_key(n: u8) -> SecretKey {
    SecretKey::from_seed(&[n; 32])
}

/// `MsgRegisterBlsKey` of `address` with `pubkey` and `proof` as given (what an attacker
/// assembles from other registrations).
fn raw(address: &str, pubkey: Vec<u8>, proof: Vec<u8>) -> Any {
    Any {
        type_url: "/gonka.bls.v1.MsgRegisterBlsKey".into(),
        value: pb::MsgRegisterBlsKey {
            address: address.into(),
            pubkey,
            proof_of_possession: proof,
        }
        .encode_to_vec(),
    }
}

fn key_of(w: &World, label: &str) -> Option<pb::BlsKey> {
    w.query::<q::Keys>(pb::QueryKeysRequest::default())
        .keys
        .into_iter()
        .find(|k| k.address == addr(label))
}

#[test]
fn a_participant_registers_rotates_and_queries_its_key() {
    let mut w = world();
    let tx = w.tx(
        "p0",
        vec![msg_register_bls_key(&addr("p0"), CHAIN_ID, &bls_key(1))],
    );
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    let event = &tx_events(block.result(0), "bls_key_registered")[0];
    assert_eq!(event["rotated"], "false");
    // The pairing check is charged: more than the whole gas of a plain send.
    assert!(
        block.result(0).gas_used > 10_000,
        "{}",
        block.result(0).gas_used
    );
    let key = w
        .query::<q::Key>(pb::QueryKeyRequest {
            address: addr("p0"),
        })
        .key
        .unwrap();
    assert_eq!(key.pubkey, bls_key(1).public_key().to_bytes().to_vec());
    assert_eq!(key.registered_height, w.chain.height());

    // Rotation replaces the key and frees the old one for nobody else to claim as p0's.
    let tx = w.tx(
        "p0",
        vec![msg_register_bls_key(&addr("p0"), CHAIN_ID, &bls_key(2))],
    );
    let block = w.block(vec![tx]);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(
        tx_events(block.result(0), "bls_key_registered")[0]["rotated"],
        "true"
    );
    assert_eq!(
        key_of(&w, "p0").unwrap().pubkey,
        bls_key(2).public_key().to_bytes().to_vec()
    );
    let tx = w.tx(
        "p1",
        vec![msg_register_bls_key(&addr("p1"), CHAIN_ID, &bls_key(1))],
    );
    let block = w.block(vec![tx]);
    assert_eq!(
        block.result(0).code,
        0,
        "p0's old key is free: {}",
        block.result(0).log
    );
    let listed = w.query::<q::Keys>(pb::QueryKeysRequest::default()).keys;
    assert_eq!(listed.len(), 2);
}

#[test]
fn bad_registrations_are_refused_with_their_code_and_change_nothing() {
    let mut w = world();
    let tx = w.tx(
        "p0",
        vec![msg_register_bls_key(&addr("p0"), CHAIN_ID, &bls_key(1))],
    );
    assert_eq!(w.block(vec![tx]).result(0).code, 0);
    // p1 copies p2's registration (seen in the mempool) before p2's tx lands: the proof
    // names p2, so it proves nothing for p1.
    let p2_msg = pb::MsgRegisterBlsKey::decode(
        msg_register_bls_key(&addr("p2"), CHAIN_ID, &bls_key(3))
            .value
            .as_slice(),
    )
    .unwrap();
    let other_chain = bls_key(4);
    let other_pubkey = other_chain.public_key().to_bytes().to_vec();
    let other_proof = other_chain
        .prove_possession(&bls_pop_bytes("another-chain", &addr("p1"), &other_pubkey))
        .to_bytes()
        .to_vec();
    // A signature under the message DST is not a proof of possession.
    let sig_not_pop = bls_key(5)
        .sign(&bls_pop_bytes(
            CHAIN_ID,
            &addr("p1"),
            &bls_key(5).public_key().to_bytes(),
        ))
        .to_bytes()
        .to_vec();
    let cases: Vec<(&str, Any, u32, &str)> = vec![
        (
            "alice",
            msg_register_bls_key(&addr("alice"), CHAIN_ID, &bls_key(6)),
            3,
            "is not a stake participant",
        ),
        (
            "p1",
            raw(
                &addr("p1"),
                p2_msg.pubkey.clone(),
                p2_msg.proof_of_possession.clone(),
            ),
            4,
            "does not verify",
        ),
        (
            "p1",
            raw(&addr("p1"), other_pubkey, other_proof),
            4,
            "does not verify",
        ),
        (
            "p1",
            raw(
                &addr("p1"),
                bls_key(5).public_key().to_bytes().to_vec(),
                sig_not_pop,
            ),
            4,
            "does not verify",
        ),
        (
            "p1",
            msg_register_bls_key(&addr("p1"), CHAIN_ID, &bls_key(1)),
            5,
            "is registered by",
        ),
    ];
    let before = w.raw_prefix(b"bls/");
    let txs: Vec<Vec<u8>> = cases
        .iter()
        .map(|(label, msg, _, _)| w.tx(label, vec![msg.clone()]))
        .collect();
    let mut txs = txs;
    let not_a_point = raw(&addr("p1"), vec![0; 48], vec![0; 96]);
    txs.push(w.tx_unsequenced("p1", vec![not_a_point]));
    let block = w.block(txs);
    for (i, (_, _, code, fragment)) in cases.iter().enumerate() {
        let r = block.result(i);
        assert_eq!(
            (r.codespace.as_str(), r.code),
            ("bls", *code),
            "case {i}: {}",
            r.log
        );
        assert!(
            r.log.contains(fragment),
            "case {i}: {:?} lacks {fragment:?}",
            r.log
        );
    }
    let r = block.result(cases.len());
    assert_eq!((r.codespace.as_str(), r.code), ("bls", 2), "{}", r.log);
    assert!(r.log.contains("G1 point"), "{}", r.log);
    assert_eq!(w.raw_prefix(b"bls/"), before, "a refusal changed state");
    // Unknown keys are a query error with its own code.
    let response = w.chain.query(
        <q::Key as gonka_proto::query::Query>::PATH,
        pb::QueryKeyRequest {
            address: addr("p1"),
        }
        .encode_to_vec(),
    );
    assert_eq!((response.codespace.as_str(), response.code), ("bls", 6));
    assert!(PublicKey::from_bytes(&key_of(&w, "p0").unwrap().pubkey).is_some());
}
