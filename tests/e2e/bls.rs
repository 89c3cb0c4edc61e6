//! End to end, key generation on the real 4-validator localnet: every validator's sidecar
//! registers a BLS key, deals, checks the shares dealt to it and keeps its shares of the
//! group key; the group key the chain publishes is what any three of the four validators'
//! kept shares sign for, and two of them cannot.

use std::sync::Arc;

use gonka_client::bls::crypto::threshold::{combine, PartialSignature, SecretShare};
use gonka_client::bls::crypto::PublicKey;
use gonka_localnet::AppStateFn;
use gonka_proto::bls::{DkgRound, QueryGroupRequest};
use gonka_proto::query as q;
use serde_json::json;

use crate::inference::{eventually, genesis, sidecars};
use crate::support::{Net, VALIDATORS};

/// The shares validator `i`'s sidecar kept of round `round`'s group key, once it has.
fn kept_shares(net: &Net, i: usize, round: u64) -> Option<Vec<SecretShare>> {
    let path = net
        .node(i)
        .home
        .join("sidecar/bls")
        .join(format!("group-{round}.json"));
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    file["shares"]
        .as_array()?
        .iter()
        .map(|s| {
            let bytes: [u8; 32] = hex::decode(s["share"].as_str()?).ok()?.try_into().ok()?;
            SecretShare::from_bytes(s["slot"].as_u64()?, &bytes)
        })
        .collect()
}

#[test]
fn the_validators_generate_a_group_key_that_any_three_of_four_sign_for() {
    crate::support::run(async {
        let net = Net::start_with("bls", VALIDATORS, |config| {
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                // 10-block epochs, so rounds start soon; short windows that fit them.
                let mut state = genesis(keys, 10);
                state["disputes"] = json!({"params": gonka_app::genesis::quick_disputes_params()});
                state["bls"] = json!({"params": {"dkg_slots": 12, "dkg_deal_blocks": 3,
                    "dkg_complaint_blocks": 2, "dkg_reveal_blocks": 2}});
                state
            })));
            let mut sidecars = sidecars();
            sidecars.validator_role = true;
            config.sidecar = Some(sidecars);
        })
        .await;
        // A round of all four validators completes (the first may start before every
        // sidecar has registered its key).
        let group: DkgRound = eventually("a completed round of all 4 validators", || async {
            net.clients[0]
                .query::<q::bls::Group>(&QueryGroupRequest {})
                .await
                .ok()?
                .round
                .filter(|r| {
                    r.members.len() == VALIDATORS && r.qualified_dealers.len() == VALIDATORS
                })
        })
        .await;
        assert_eq!((group.total_slots, group.threshold), (12, 9));
        let shares: Vec<Vec<SecretShare>> = eventually("every validator's kept shares", || async {
            (0..VALIDATORS)
                .map(|i| kept_shares(&net, i, group.id))
                .collect::<Option<Vec<_>>>()
        })
        .await;
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
    });
}
