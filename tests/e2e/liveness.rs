//! Validators that fail consensus, on real CometBFT: a stopped validator misses its share of
//! the signing window and is jailed, slashed and dropped from CometBFT's validator set while
//! the other three go on; a validator whose consensus key runs on two nodes signs twice, and
//! the evidence CometBFT commits slashes, jails and tombstones it.
//!
//! Genesis sets a 10-block window (at least half signed), so the test sees it within seconds;
//! the defaults are 100 blocks, 10% for downtime and 5% for double signing.

use std::sync::Arc;
use std::time::Duration;

use gonka_localnet::AppStateFn;
use gonka_proto::stake::{Participant, QueryParticipantRequest};
use tendermint_rpc::Client as _;

use crate::inference::{eventually, genesis_config, GNK};
use crate::support::{addr, Net, VALIDATORS};

const BOND: u128 = 10_000 * GNK;
const DOWNTIME_PPM: u64 = 100_000;
const DOUBLE_SIGN_PPM: u64 = 50_000;

fn configure(config: &mut gonka_localnet::LocalnetConfig) {
    config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
        let mut genesis = genesis_config(keys, 100_000);
        genesis.stake_params = Some(gonka_proto::stake::Params {
            signed_blocks_window: 10,
            min_signed_ppm: 500_000,
            downtime_slash_ppm: DOWNTIME_PPM,
            double_sign_slash_ppm: DOUBLE_SIGN_PPM,
            ..gonka_stake::default_params()
        });
        genesis.app_state()
    })));
}

async fn participant(net: &Net, i: usize) -> Participant {
    net.clients[0]
        .query::<gonka_proto::query::stake::Participant>(&QueryParticipantRequest {
            operator: addr(&format!("validator{i}")),
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .participant
        .expect("a participant")
}

/// Whether node `i`'s consensus key is in CometBFT's validator set, as node 0 reports it.
async fn in_validator_set(net: &Net, i: usize) -> bool {
    let key = participant(net, i).await.consensus_pubkey;
    let set = net.clients[0]
        .http()
        .validators(net.height(0).await as u32, tendermint_rpc::Paging::All)
        .await
        .unwrap();
    set.validators.iter().any(|v| v.pub_key.to_bytes() == key)
}

/// Waits until node `i`'s key is out of CometBFT's validator set.
async fn leaves_the_set(net: &Net, i: usize) {
    eventually(&format!("validator {i} out of CometBFT's set"), || async {
        (!in_validator_set(net, i).await).then_some(())
    })
    .await;
}

/// The chain commits `blocks` more blocks on node 0.
async fn goes_on(net: &Net, blocks: u64) {
    let now = net.height(0).await;
    net.wait_for_height(0, now + blocks, Duration::from_secs(60))
        .await;
}

#[test]
fn a_stopped_validator_is_jailed_slashed_and_leaves_the_set_while_the_chain_goes_on() {
    crate::support::run(async {
        let mut net = Net::start_with("downtime", VALIDATORS, configure).await;
        goes_on(&net, 2).await;
        assert!(in_validator_set(&net, 3).await);
        net.kill(3);
        let jailed = eventually("validator 3 jailed for downtime", || async {
            let p = participant(&net, 3).await;
            p.jailed.then_some(p)
        })
        .await;
        assert!(!jailed.tombstoned);
        assert_eq!(
            jailed.bonded,
            (BOND - BOND * u128::from(DOWNTIME_PPM) / 1_000_000).to_string()
        );
        leaves_the_set(&net, 3).await;
        // The others keep their stake and their places, and commit on without it.
        for i in 0..3 {
            let p = participant(&net, i).await;
            assert!(!p.jailed && p.bonded == BOND.to_string(), "{p:?}");
        }
        goes_on(&net, 3).await;
    });
}

#[test]
fn a_validator_key_signing_on_two_nodes_is_caught_slashed_and_tombstoned() {
    crate::support::run(async {
        let mut net = Net::start_with("double-sign", VALIDATORS + 1, configure).await;
        goes_on(&net, 2).await;
        // A twin of validator 3: a full node holding the same consensus key, which signs
        // whatever it sees, as a careless failover would.
        let twin = net.add_full_node();
        let key = |i: usize| {
            net.node(i)
                .cometbft_home
                .join("config/priv_validator_key.json")
        };
        std::fs::copy(key(3), key(twin)).expect("copying validator 3's key to the twin");
        net.restart(twin);
        let caught = eventually("validator 3 tombstoned for double signing", || async {
            let p = participant(&net, 3).await;
            p.tombstoned.then_some(p)
        })
        .await;
        assert!(caught.jailed);
        assert_eq!(
            caught.bonded,
            (BOND - BOND * u128::from(DOUBLE_SIGN_PPM) / 1_000_000).to_string()
        );
        leaves_the_set(&net, 3).await;
        net.kill(twin);
        goes_on(&net, 3).await;
    });
}
