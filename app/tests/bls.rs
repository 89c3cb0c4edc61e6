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

/// Asserts tx `i` of `block` failed with bls code `code` and a log holding `fragment`.
fn assert_bls_error(block: &Block, i: usize, code: u32, fragment: &str) {
    let r = block.result(i);
    assert_eq!(
        (r.codespace.as_str(), r.code),
        ("bls", code),
        "case {i}: {}",
        r.log
    );
    assert!(
        r.log.contains(fragment),
        "case {i}: {:?} lacks {fragment:?}",
        r.log
    );
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
    // Everything but the beacons, which every block records.
    let keys_and_rounds = |w: &World| {
        let mut state = w.raw_prefix(b"bls/");
        state.retain(|(key, _)| !key.starts_with(b"bls/beacon/") && key != b"bls/latest_beacon");
        state
    };
    let before = keys_and_rounds(&w);
    let txs: Vec<Vec<u8>> = cases
        .iter()
        .map(|(label, msg, _, _)| w.tx(label, vec![msg.clone()]))
        .collect();
    let mut txs = txs;
    let not_a_point = raw(&addr("p1"), vec![0; 48], vec![0; 96]);
    txs.push(w.tx_unsequenced("p1", vec![not_a_point]));
    let block = w.block(txs);
    for (i, (_, _, code, fragment)) in cases.iter().enumerate() {
        assert_bls_error(&block, i, *code, fragment);
    }
    let r = block.result(cases.len());
    assert_eq!((r.codespace.as_str(), r.code), ("bls", 2), "{}", r.log);
    assert!(r.log.contains("G1 point"), "{}", r.log);
    assert_eq!(keys_and_rounds(&w), before, "a refusal changed state");
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

// ---------------------------------------------------------------------------------------
// Distributed key generation.

use gonka_bls_crypto::dkg::decrypt_share;
use gonka_bls_crypto::threshold::{
    combine, Commitments, PartialSignature, Polynomial, SecretShare,
};

/// Seven participants with equal power and BLS keys `bls_key(10 + i)`; 10-block epochs;
/// rounds of 14 slots (2 each, threshold 10) with 2-block phases.
fn dkg_world() -> World {
    dkg_world_with_phases(2, 2, 2)
}

/// [`dkg_world`] with phases of `deal`, `complain` and `reveal` blocks.
fn dkg_world_with_phases(deal: u64, complain: u64, reveal: u64) -> World {
    let mut setup = Setup::new(7, 1_000_000);
    setup.epoch_length = 10;
    let mut w = World::with_genesis(setup, |state| {
        state["bls"] = serde_json::json!({"params": {"dkg_slots": 14, "dkg_deal_blocks": deal,
            "dkg_complaint_blocks": complain, "dkg_reveal_blocks": reveal, "beacon_keep_blocks": 1000}});
    });
    let txs: Vec<Vec<u8>> = (0..7u8)
        .map(|i| {
            let label = format!("p{i}");
            w.tx(
                &label,
                vec![msg_register_bls_key(
                    &addr(&label),
                    CHAIN_ID,
                    &bls_key(10 + i),
                )],
            )
        })
        .collect();
    let block = w.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    w
}

fn member_label(address: &str) -> String {
    (0..7)
        .map(|i| format!("p{i}"))
        .find(|l| addr(l) == address)
        .unwrap()
}

fn round_of(w: &World) -> pb::DkgRound {
    w.query::<q::Dkg>(pb::QueryDkgRequest { round: 0 })
        .round
        .unwrap()
}

/// Runs blocks until the round's `phase_end` has passed.
fn past(w: &mut World, height: u64) {
    while w.chain.height() <= height {
        w.block(vec![]);
    }
}

/// A key generation round end to end: seven validators deal; p6 deals a bad share to p1,
/// p1 complains and p6's forced reveal shows it (p6 is disqualified); p2 complains falsely
/// about p0 and p0's reveal clears it (p2 is disqualified: a receiver cannot frame an honest
/// dealer). The round completes with the five qualified dealers, and any ten slots of the
/// members not disqualified sign for the one group key the chain published.
#[test]
fn a_key_generation_round_makes_one_group_key_and_disqualifies_whoever_lied() {
    let mut w = dkg_world();
    while round_query(&w).is_none() {
        w.block(vec![]);
    }
    let round = round_of(&w);
    assert_eq!(
        (round.total_slots, round.threshold, round.members.len()),
        (14, 10, 7)
    );
    assert!(round.members.iter().all(|m| m.slots == 2));
    let polys: Vec<Polynomial> = (0..7u8)
        .map(|i| Polynomial::from_seed(10, &[i, 42]))
        .collect();
    let p1_first = round
        .members
        .iter()
        .find(|m| m.address == addr("p1"))
        .unwrap()
        .first_slot;
    let txs: Vec<Vec<u8>> = round
        .members
        .iter()
        .map(|m| {
            let label = member_label(&m.address);
            let i: usize = label[1..].parse().unwrap();
            let bad = (label == "p6").then_some(p1_first);
            w.tx(
                &label,
                vec![dkg_dealing(&round, &m.address, &polys[i], bad)],
            )
        })
        .collect();
    let block = w.block(txs);
    for i in 0..7 {
        assert_eq!(block.result(i).code, 0, "{}", block.result(i).log);
    }
    // A second dealing and a complaint in the dealing phase are refused.
    let again = dkg_dealing(&round, &addr("p0"), &polys[0], None);
    let early = dkg_complaint(round.id, "p1", "p6");
    let txs = vec![w.tx("p0", vec![again]), w.tx("p1", vec![early])];
    let block = w.block(txs);
    assert_eq!(
        (block.result(0).codespace.as_str(), block.result(0).code),
        ("bls", 10)
    );
    assert_eq!(
        (block.result(1).codespace.as_str(), block.result(1).code),
        ("bls", 9),
        "{}",
        block.result(1).log
    );
    past(&mut w, round.deal_deadline);

    // p1 finds p6's share bad (it checks every decrypted share against the commitments).
    let dealing_of = |w: &World, dealer: &str| {
        w.query::<q::Dealing>(pb::QueryDealingRequest {
            round: round.id,
            dealer: addr(dealer),
        })
        .dealing
        .unwrap()
    };
    let share_of = |w: &World, member: &str, dealer: &str, slot: u64| -> Option<SecretShare> {
        let d = dealing_of(w, dealer);
        let i: u8 = member[1..].parse().unwrap();
        let ct: [u8; 32] = d.shares[(slot - 1) as usize].as_slice().try_into().unwrap();
        let context = gonka_proto::signing::dkg_dealing_context(CHAIN_ID, round.id, &addr(dealer));
        decrypt_share(
            &bls_key(10 + i),
            &PublicKey::from_bytes(&d.ephemeral).unwrap(),
            slot,
            &ct,
            &context,
        )
        .filter(|s| {
            Commitments::from_bytes(&d.commitments)
                .unwrap()
                .verify_share(s)
        })
    };
    assert!(
        share_of(&w, "p1", "p6", p1_first).is_none(),
        "p6's share to p1 is bad"
    );
    assert!(share_of(&w, "p1", "p0", p1_first).is_some());
    let txs = vec![
        w.tx("p1", vec![dkg_complaint(round.id, "p1", "p6")]),
        w.tx("p2", vec![dkg_complaint(round.id, "p2", "p0")]),
    ];
    let block = w.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    assert_eq!(block.result(1).code, 0, "{}", block.result(1).log);
    past(&mut w, round.complaint_deadline);

    // The dealers answer with their Diffie-Hellman points and proofs.
    let reveal = |dealer: &str, complainer: &str| {
        let i: u8 = complainer[1..].parse().unwrap();
        dkg_reveal(round.id, dealer, complainer, &bls_key(10 + i).public_key())
    };
    let mut forged = pb::MsgDkgReveal::decode(reveal("p0", "p1").value.as_slice()).unwrap();
    forged.complainer = addr("p2");
    let txs = vec![
        w.tx(
            "p0",
            vec![Any {
                type_url: "/gonka.bls.v1.MsgDkgReveal".into(),
                value: forged.encode_to_vec(),
            }],
        ),
        w.tx("p6", vec![reveal("p6", "p1")]),
        w.tx("p0", vec![reveal("p0", "p2")]),
    ];
    let block = w.block(txs);
    assert_eq!(
        (block.result(0).codespace.as_str(), block.result(0).code),
        ("bls", 15),
        "a point for another receiver: {}",
        block.result(0).log
    );
    assert_eq!(
        tx_events(block.result(1), "dkg_reveal")[0]["outcome"],
        "invalid_shares"
    );
    assert_eq!(
        tx_events(block.result(2), "dkg_reveal")[0]["outcome"],
        "valid_shares"
    );
    past(&mut w, round.reveal_deadline);

    let done = round_of(&w);
    assert_eq!(done.status, "completed", "{}", done.failure);
    let labels = |addresses: Vec<&String>| {
        let mut labels: Vec<String> = addresses.into_iter().map(|a| member_label(a)).collect();
        labels.sort();
        labels
    };
    let disqualified = labels(
        done.members
            .iter()
            .filter(|m| m.disqualified)
            .map(|m| &m.address)
            .collect(),
    );
    assert_eq!(disqualified, ["p2", "p6"]);
    let qualified = labels(done.qualified_dealers.iter().collect());
    assert_eq!(qualified, ["p0", "p1", "p3", "p4", "p5"]);
    let group_commitments = Commitments::sum(
        &[0usize, 1, 3, 4, 5]
            .iter()
            .map(|&i| polys[i].commitments())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(
        done.group_pubkey,
        group_commitments.public_key().to_bytes().to_vec()
    );
    assert_eq!(
        w.query::<q::Group>(pb::QueryGroupRequest {})
            .round
            .unwrap()
            .group_pubkey,
        done.group_pubkey
    );

    // Each member not disqualified sums what the qualified dealers dealt it; any ten slots sign.
    let message = b"gonka beacon height 99";
    let mut partials: Vec<PartialSignature> = Vec::new();
    for m in done.members.iter().filter(|m| !m.disqualified) {
        let label = member_label(&m.address);
        for slot in m.first_slot..m.first_slot + m.slots {
            let mine: Vec<SecretShare> = qualified
                .iter()
                .map(|d| {
                    share_of(&w, &label, d, slot).expect("a qualified dealer's share verifies")
                })
                .collect();
            let share = SecretShare::sum(&mine).unwrap();
            assert!(group_commitments.verify_share(&share));
            partials.push(share.sign(message));
        }
    }
    assert_eq!(partials.len(), 10);
    let group_key = PublicKey::from_bytes(&done.group_pubkey).unwrap();
    let signature = combine(&partials).unwrap();
    assert!(group_key.verify(message, &signature));
    assert_eq!(
        combine(&partials[..9]).map(|s| group_key.verify(message, &s)),
        Some(false)
    );
}

/// Attack (issue 34, item 12): two colluding dealers deal `f` and `−f` and nobody else deals.
/// Their sum is the zero polynomial, so the group key would be the identity point, which no
/// signature verifies against and which would halt the beacon. The round fails instead and
/// no group key is published.
#[test]
fn dealers_whose_polynomials_cancel_fail_the_round_instead_of_making_an_identity_key() {
    let mut w = dkg_world();
    while round_query(&w).is_none() {
        w.block(vec![]);
    }
    let round = round_of(&w);
    let f = Polynomial::from_seed(round.threshold as usize, b"colluder");
    let txs = vec![
        w.tx("p0", vec![dkg_dealing(&round, &addr("p0"), &f, None)]),
        w.tx("p1", vec![dkg_dealing(&round, &addr("p1"), &-&f, None)]),
    ];
    let block = w.block(txs);
    for i in 0..2 {
        assert_eq!(block.result(i).code, 0, "{}", block.result(i).log);
    }
    past(&mut w, round.reveal_deadline);
    let done = round_of(&w);
    assert_eq!(
        done.status,
        "failed",
        "group key {}",
        hex::encode(&done.group_pubkey)
    );
    assert!(done.failure.contains("identity"), "{}", done.failure);
    assert!(done.group_pubkey.is_empty());
    assert!(w
        .query::<q::Group>(pb::QueryGroupRequest {})
        .round
        .is_none());
}

fn round_query(w: &World) -> Option<pb::DkgRound> {
    let response = w.chain.query(
        <q::Dkg as gonka_proto::query::Query>::PATH,
        pb::QueryDkgRequest { round: 0 }.encode_to_vec(),
    );
    (response.code == 0).then(|| {
        pb::QueryDkgResponse::decode(response.value.as_ref())
            .unwrap()
            .round
            .unwrap()
    })
}

/// Every key generation refusal has its own code and changes nothing.
#[test]
fn bad_key_generation_messages_are_refused_with_their_code() {
    let mut w = dkg_world();
    while round_query(&w).is_none() {
        w.block(vec![]);
    }
    let round = round_of(&w);
    let poly = Polynomial::from_seed(round.threshold as usize, b"p0");
    let short = Polynomial::from_seed(round.threshold as usize - 1, b"p1");
    let mut other_round = round.clone();
    other_round.id = 99;
    let refused = |block: &Block, i: usize, code: u32, fragment: &str| {
        assert_bls_error(block, i, code, fragment);
        assert!(block
            .result(i)
            .events
            .iter()
            .all(|e| !e.r#type.starts_with("dkg_")));
    };
    let mut bad_ephemeral = pb::MsgDkgDeal::decode(
        dkg_dealing(&round, &addr("p2"), &poly, None)
            .value
            .as_slice(),
    )
    .unwrap();
    bad_ephemeral.ephemeral.pop();
    let txs = vec![
        w.tx("p0", vec![dkg_dealing(&round, &addr("p0"), &poly, None)]),
        w.tx("p1", vec![dkg_dealing(&round, &addr("p1"), &short, None)]),
        w.tx(
            "p3",
            vec![dkg_dealing(&other_round, &addr("p3"), &poly, None)],
        ),
        w.tx(
            "alice",
            vec![dkg_dealing(&round, &addr("alice"), &poly, None)],
        ),
    ];
    let mut txs = txs;
    txs.push(w.tx_unsequenced(
        "p2",
        vec![Any {
            type_url: "/gonka.bls.v1.MsgDkgDeal".into(),
            value: bad_ephemeral.encode_to_vec(),
        }],
    ));
    let block = w.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    refused(&block, 1, 11, "needs 10 commitments");
    refused(&block, 2, 16, "no key generation round 99");
    refused(&block, 3, 8, "is not a member");
    refused(&block, 4, 11, "ephemeral must be a 48-byte");
    past(&mut w, round.deal_deadline);

    let txs = vec![
        w.tx("p1", vec![dkg_complaint(round.id, "p1", "p0")]),
        w.tx("p1", vec![dkg_complaint(round.id, "p1", "p0")]),
        w.tx("p1", vec![dkg_complaint(round.id, "p1", "p2")]),
        w.tx("p2", vec![dkg_dealing(&round, &addr("p2"), &poly, None)]),
    ];
    let block = w.block(txs);
    assert_eq!(block.result(0).code, 0, "{}", block.result(0).log);
    refused(&block, 1, 13, "already complained");
    refused(&block, 2, 12, "did not deal");
    refused(&block, 3, 9, "accepts dealings in blocks");
    past(&mut w, round.complaint_deadline);

    let p3_key = bls_key(13).public_key();
    let tx = w.tx("p0", vec![dkg_reveal(round.id, "p0", "p3", &p3_key)]);
    let block = w.block(vec![tx]);
    refused(&block, 0, 14, "no unanswered complaint");
    // p0 does not answer p1: at the reveal deadline p0 is disqualified, and with no other
    // dealer the round fails; no group is in force.
    past(&mut w, round.reveal_deadline);
    let done = round_of(&w);
    assert_eq!(
        (done.status.as_str(), done.failure.as_str()),
        ("failed", "no dealer qualified")
    );
    assert!(w
        .query::<q::Group>(pb::QueryGroupRequest {})
        .round
        .is_none());
}

/// A round whose last phase ends in the epoch's last block is settled there, before the next
/// round starts, not superseded by it.
#[test]
fn a_round_ending_with_its_epoch_completes_before_the_next_starts() {
    let mut w = dkg_world_with_phases(4, 3, 3);
    while round_query(&w).is_none() {
        w.block(vec![]);
    }
    let round = round_of(&w);
    assert_eq!(
        round.reveal_deadline,
        round.start_height + 10,
        "ends with the next epoch"
    );
    let txs: Vec<Vec<u8>> = round
        .members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let poly = Polynomial::from_seed(10, &[i as u8]);
            w.tx(
                &member_label(&m.address),
                vec![dkg_dealing(&round, &m.address, &poly, None)],
            )
        })
        .collect();
    assert!(w.block(txs).response.tx_results.iter().all(|r| r.code == 0));
    let next = loop {
        let block = w.block(vec![]);
        if block.closed_epoch.is_some() {
            break block;
        }
    };
    assert_eq!(w.chain.height(), round.reveal_deadline);
    assert_eq!(
        next.events("dkg_completed")[0]["round"],
        round.id.to_string()
    );
    assert_eq!(
        next.events("dkg_started")[0]["round"],
        (round.id + 1).to_string()
    );
    let group = w.query::<q::Group>(pb::QueryGroupRequest {}).round.unwrap();
    assert_eq!((group.id, group.qualified_dealers.len()), (round.id, 7));
}
