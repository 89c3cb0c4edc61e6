//! End to end, the threshold group and the randomness beacon on the real 4-validator
//! localnet with vote extensions on:
//! - every validator's sidecar registers a BLS key, deals, and checks the shares dealt to
//!   it; the group key the chain publishes is what any three of the four validators' shares
//!   (derived from the chain's dealings with their keys) sign for, and two of them cannot;
//! - from the group's first height on, every height's beacon is the group signature, and it
//!   verifies on its own against the group key;
//! - a validator killed mid-epoch does not stop the beacon (3 of 4 equal-power validators
//!   hold exactly the threshold) and the next epoch's key generation completes without it;
//! - a validator that signs wrong partials (and, as proposer, a wrong beacon) has its
//!   extensions and proposals rejected, and the chain and its beacon go on.

use std::sync::Arc;

use gonka_client::bls::crypto::member::group_shares;
use gonka_client::bls::crypto::threshold::{combine, PartialSignature, SecretShare};
use gonka_client::bls::crypto::{PublicKey, SecretKey, Signature};
use gonka_localnet::{AppStateFn, LocalnetConfig};
use gonka_proto::bls::{
    Beacon, DkgRound, QueryBeaconRequest, QueryDealingRequest, QueryDkgRequest, QueryGroupRequest,
};
use gonka_proto::query as q;
use gonka_proto::signing::beacon_message;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::inference::{eventually, genesis, sidecars};
use crate::support::{Net, CHAIN_ID, VALIDATORS};

/// A localnet with 10-block epochs, 12 slots and short key generation phases, and every
/// validator's sidecars (the validator role deals and registers BLS keys).
async fn start(label: &str, configure: impl Fn(&mut LocalnetConfig)) -> Net {
    Net::start_with(label, VALIDATORS, |config| {
        config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
            // 10-block epochs, so rounds start soon; short windows that fit them.
            let mut state = genesis(keys, 10);
            state["disputes"] = json!({"params": gonka_app::genesis::quick_disputes_params()});
            // Keep the genesis signers' keys; short key generation phases.
            state["bls"]["params"] = json!({"dkg_slots": 12, "dkg_deal_blocks": 3,
                "dkg_complaint_blocks": 2, "dkg_reveal_blocks": 2, "beacon_keep_blocks": 1000});
            state
        })));
        let mut sidecars = sidecars();
        sidecars.validator_role = true;
        config.sidecar = Some(sidecars);
        configure(config);
    })
    .await
}

/// The group in force once it satisfies `accept`.
async fn group_where(net: &Net, what: &str, accept: impl Fn(&DkgRound) -> bool) -> DkgRound {
    eventually(what, || async {
        net.clients[0]
            .query::<q::bls::Group>(&QueryGroupRequest {})
            .await
            .ok()?
            .round
            .filter(&accept)
    })
    .await
}

/// Validator `i`'s shares of `round`'s group key, derived as its node does: from the
/// qualified dealers' dealings on chain with the BLS key its sidecar keeps.
async fn shares_of(net: &Net, i: usize, round: &DkgRound) -> Vec<SecretShare> {
    let text = std::fs::read_to_string(net.node(i).home.join("sidecar/bls/bls.key")).unwrap();
    let bytes: [u8; 32] = hex::decode(text.trim()).unwrap().try_into().unwrap();
    let key = SecretKey::from_bytes(&bytes).unwrap();
    let mut dealings = Vec::new();
    for dealer in &round.qualified_dealers {
        let request = QueryDealingRequest {
            round: round.id,
            dealer: dealer.clone(),
        };
        let answer = net.clients[0].query::<q::bls::Dealing>(&request).await;
        dealings.push(answer.unwrap().dealing.unwrap());
    }
    group_shares(&key, CHAIN_ID, round, &dealings)
        .unwrap_or_else(|e| panic!("validator {i}'s shares: {e}"))
}

/// The beacon of `height`, once the next block has recorded it, asked of node `client`.
async fn beacon(net: &Net, client: usize, height: u64) -> Beacon {
    eventually(&format!("the beacon of height {height}"), || async {
        net.clients[client]
            .query::<q::bls::Beacon>(&QueryBeaconRequest { height })
            .await
            .ok()?
            .beacon
    })
    .await
}

/// Checks, from the chain's answers alone, that every height in `heights` has a group
/// beacon whose signature verifies against its round's group key and whose value is its
/// hash.
async fn assert_group_beacons(net: &Net, client: usize, heights: std::ops::RangeInclusive<u64>) {
    for height in heights {
        let b = beacon(net, client, height).await;
        assert_eq!(b.source, "group", "height {height} has no group beacon");
        let round = net.clients[client]
            .query::<q::bls::Dkg>(&QueryDkgRequest { round: b.round })
            .await
            .unwrap()
            .round
            .unwrap();
        let key = PublicKey::from_bytes(&round.group_pubkey).unwrap();
        let signature = Signature::from_bytes(&b.signature).unwrap();
        assert!(
            key.verify(&beacon_message(CHAIN_ID, height), &signature),
            "the beacon of height {height} does not verify against round {}",
            b.round
        );
        assert_eq!(b.value, Sha256::digest(&b.signature).to_vec());
    }
}

#[test]
fn the_group_signs_every_height_and_survives_a_killed_validator() {
    crate::support::run(async {
        let mut net = start("bls", |_| {}).await;
        // A round of all four validators completes (the first may start before every
        // sidecar has registered its key).
        let group = group_where(&net, "a completed round of all 4 validators", |r| {
            r.members.len() == VALIDATORS && r.qualified_dealers.len() == VALIDATORS
        })
        .await;
        assert_eq!((group.total_slots, group.threshold), (12, 9));
        let mut shares = Vec::new();
        for i in 0..VALIDATORS {
            shares.push(shares_of(&net, i, &group).await);
        }
        let group_key = PublicKey::from_bytes(&group.group_pubkey).unwrap();
        let message = b"gonka e2e beacon";
        let partials = |validators: &[usize]| -> Vec<PartialSignature> {
            validators
                .iter()
                .flat_map(|&i| shares[i].iter().map(|s| s.sign(message)))
                .collect()
        };
        for three in [[0, 1, 2], [1, 2, 3], [0, 2, 3]] {
            let signature = combine(&partials(&three)).unwrap();
            assert!(
                group_key.verify(message, &signature),
                "validators {three:?}"
            );
        }
        let two = combine(&partials(&[0, 3])).unwrap();
        assert!(
            !group_key.verify(message, &two),
            "6 of 12 slots are below the threshold"
        );

        // Every height from the group's first on has its beacon.
        let now = net.height(0).await;
        assert_group_beacons(&net, 0, group.finalized_height + 1..=now + 2).await;

        // Validator 3 dies mid-epoch: the other three still hold the threshold.
        net.kill(3);
        let killed_at = net.height(0).await;
        let next = group_where(&net, "a round completed without validator 3", |r| {
            r.finalized_height > killed_at && r.qualified_dealers.len() == VALIDATORS - 1
        })
        .await;
        let now = net
            .wait_for_height(
                0,
                next.finalized_height + 3,
                std::time::Duration::from_secs(60),
            )
            .await;
        assert_group_beacons(&net, 0, killed_at..=now).await;
        let latest = beacon(&net, 0, now).await;
        assert_eq!(latest.round, next.id, "the new group signs");
        // What the CLI prints is what the chain recorded.
        let printed = crate::support::gonkad_json(&[
            "--node",
            &net.node(0).rpc_url,
            "--output",
            "json",
            "query",
            "bls",
            "beacon",
            &now.to_string(),
        ]);
        assert_eq!(printed["beacon"]["source"], "group", "{printed}");
        assert_eq!(
            printed["beacon"]["signature"],
            serde_json::to_value(&latest.signature).unwrap(),
            "{printed}"
        );

        // The light client verifies every certified epoch from genesis.json alone: the
        // genesis signers' certificates, the handovers to each group and the groups' own.
        let genesis = net.node(0).cometbft_home.join("config/genesis.json");
        let verified = eventually("three certified epochs", || async {
            let out = crate::support::gonkad(&[
                "--node",
                &net.node(0).rpc_url,
                "--output",
                "json",
                "verify-epochs",
                "--genesis",
                genesis.to_str().unwrap(),
            ]);
            let report: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            (report["verified_epochs"].as_u64()? >= 3).then_some(report)
        })
        .await;
        let signers: Vec<u64> = verified["epochs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["signer_round"].as_u64().unwrap())
            .collect();
        assert_eq!(
            signers[0], 0,
            "the genesis signers certify epoch 0: {verified}"
        );
        assert!(
            signers.iter().any(|r| *r >= group.id),
            "a group certifies later epochs: {verified}"
        );
    });
}

#[test]
fn a_validator_signing_wrong_partials_is_rejected_and_the_beacon_goes_on() {
    crate::support::run(async {
        let corrupt = VALIDATORS - 1;
        let net = start("bls-corrupt", |config| {
            config
                .node_app_args
                .insert(corrupt, vec!["--testing-corrupt-beacon".into()]);
        })
        .await;
        let group = group_where(&net, "a completed round of all 4 validators", |r| {
            r.members.len() == VALIDATORS && r.qualified_dealers.len() == VALIDATORS
        })
        .await;
        // Enough heights that the corrupt validator's turn to propose comes round.
        let from = group.finalized_height + 1;
        net.wait_all_heights(from + 12, std::time::Duration::from_secs(120))
            .await;
        assert_group_beacons(&net, 0, from..=from + 10).await;
        let honest_log = std::fs::read_to_string(&net.node(0).app_log).unwrap();
        assert!(
            honest_log.contains("rejecting a vote extension"),
            "node 0 never rejected the corrupt extensions; {}",
            net.logs_of(0)
        );
        assert!(
            honest_log.contains("rejecting proposal"),
            "node 0 never rejected a corrupt beacon; {}",
            net.logs_of(0)
        );
    });
}
