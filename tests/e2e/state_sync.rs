//! State sync: a fifth node joins a running network from a validator's snapshot, verified by
//! CometBFT's light client against a trusted block, instead of replaying from genesis; it
//! never executes the blocks before the snapshot and then follows with the validators' app
//! hashes. A full node replaying from genesis on the same network is timed beside it.

use std::path::Path;
use std::time::{Duration, Instant};

use gonka_app::genesis::{app_state, GenesisAccount};
use gonka_client::msg_send;
use gonka_localnet::{enable_state_sync, StateSync};

use crate::support::{addr, http_get, min_gas_price, Net, START_BALANCE, VALIDATORS};

/// Validators write a snapshot every this many heights, unless `GONKA_E2E_SNAPSHOT_INTERVAL`
/// says otherwise (a longer chain makes the join-versus-replay figures more telling).
fn interval() -> u64 {
    std::env::var("GONKA_E2E_SNAPSHOT_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(40)
}
/// Bound on each wait.
const WAIT: Duration = Duration::from_secs(240);

/// Heights the app in `log` committed (its `committed height=N` lines).
fn committed_heights(log: &str) -> Vec<u64> {
    log.lines()
        .filter_map(|line| line.split_once("committed height=").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The height of the snapshot the app in `log` restored (its `store restored from a
/// snapshot` line).
fn restored_height(log: &str) -> Option<u64> {
    let line = log
        .lines()
        .find(|l| l.contains("store restored from a snapshot"))?;
    let (_, rest) = line.split_once("version=")?;
    rest.split_whitespace().next()?.parse().ok()
}

fn snapshot_written(app_home: &Path, height: u64) -> bool {
    app_home
        .join("data/snapshots")
        .join(height.to_string())
        .join("metadata")
        .exists()
}

#[test]
fn a_new_node_joins_from_a_snapshot_and_follows_the_chain() {
    crate::support::run(async {
        let interval = interval();
        let accounts = vec![GenesisAccount {
            address: addr("alice"),
            ngnk: START_BALANCE,
        }];
        let mut net = Net::start_with("state-sync", VALIDATORS + 2, move |config| {
            config.app_state = app_state(&accounts, min_gas_price());
            config.app_args = ["--snapshot-interval", &interval.to_string()]
                .iter()
                .chain(&["--snapshot-keep-recent", "2"])
                .map(Into::into)
                .collect();
        })
        .await;
        // Some state beyond genesis: new accounts with balances.
        for n in 0..3 {
            let to = addr(&format!("state-sync-{n}"));
            net.tx_ok(
                0,
                "alice",
                vec![msg_send(&addr("alice"), &to, 1_000 + n as u128)],
                &format!("state sync send {n}"),
            )
            .await;
        }

        // Two snapshots on every validator, and blocks past the second (the light client
        // verifies the snapshot height's successors).
        let snapshot_height = 2 * interval;
        net.wait_all_heights(snapshot_height + 3, WAIT).await;
        let deadline = Instant::now() + WAIT;
        for i in 0..VALIDATORS {
            let home = net.node(i).app_home.clone();
            while !(snapshot_written(&home, interval) && snapshot_written(&home, snapshot_height)) {
                assert!(
                    Instant::now() < deadline,
                    "{} wrote no snapshots of {interval} and {snapshot_height}",
                    net.logs_of(i)
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }

        // A full node replaying from genesis, timed to the tip it saw at its start.
        let replay = net.add_full_node();
        let replay_tip = net.height(0).await;
        let started = Instant::now();
        net.restart(replay);
        net.wait_for_height(replay, replay_tip, WAIT).await;
        let replay_time = started.elapsed();

        // The state-syncing node: it trusts the header of the snapshot height, read from
        // validator 0, and checks headers against validators 0 and 1.
        let synced = net.add_full_node();
        let (_, trust_hash) = net.block_hashes(0, snapshot_height).await;
        enable_state_sync(
            net.node(synced),
            &StateSync {
                rpc_servers: vec![net.node(0).rpc_url.clone(), net.node(1).rpc_url.clone()],
                trust_height: snapshot_height,
                trust_hash,
                trust_period: "168h0m0s".into(),
                discovery_time: "5s".into(),
            },
        )
        .unwrap_or_else(|e| panic!("{e:#}"));
        let sync_tip = net.height(0).await;
        let started = Instant::now();
        net.restart(synced);
        net.wait_for_height(synced, sync_tip, WAIT).await;
        let join_time = started.elapsed();

        // It restored a snapshot and executed only the blocks after it.
        let log = std::fs::read_to_string(&net.node(synced).app_log).unwrap();
        let restored = restored_height(&log)
            .unwrap_or_else(|| panic!("{} restored no snapshot", net.logs_of(synced)));
        assert!(
            restored >= snapshot_height && restored.is_multiple_of(interval),
            "restored height {restored}"
        );
        let committed = committed_heights(&log);
        assert!(
            committed.iter().all(|&h| h > restored),
            "{} committed heights up to the snapshot's {restored}: {:?}",
            net.logs_of(synced),
            &committed[..committed.len().min(5)]
        );
        let (status, body) = http_get(net.node(synced).rpc_addr, "/status");
        assert_eq!(status, 200, "{body}");
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        let earliest: u64 = status["result"]["sync_info"]["earliest_block_height"]
            .as_str()
            .and_then(|h| h.parse().ok())
            .unwrap_or_else(|| panic!("no earliest_block_height in {body}"));
        assert!(
            earliest > restored,
            "the synced node's block store starts at {earliest}, not after the snapshot height \
             {restored}"
        );

        // Same state as the validators, now and a few blocks later, with txs.
        net.assert_app_agrees(synced, 0).await;
        net.tx_ok(
            synced,
            "alice",
            vec![msg_send(&addr("alice"), &addr("state-sync-after"), 7)],
            "a send through the synced node",
        )
        .await;
        let tip = net.height(0).await;
        net.wait_for_height(synced, tip + 3, WAIT).await;
        let agreed = net.assert_app_agrees(synced, 0).await;
        assert!(agreed > tip);
        let (replay_height, _) = net.app_info(replay).await;
        assert!(replay_height > tip);

        // A restart resumes from its own state (no second state sync: CometBFT skips it once
        // the app has a height) and goes on agreeing.
        net.kill(synced);
        net.restart(synced);
        let tip = net.height(0).await;
        net.wait_for_height(synced, tip + 2, WAIT).await;
        net.assert_app_agrees(synced, 0).await;
        let log = std::fs::read_to_string(&net.node(synced).app_log).unwrap();
        assert_eq!(
            log.matches("store restored from a snapshot").count(),
            1,
            "{}",
            net.logs_of(synced)
        );

        eprintln!(
            "state sync: the new node restored the snapshot of height {restored} and caught up \
             to height {sync_tip} in {join_time:.1?} (block store from {earliest}); a node \
             replaying from genesis caught up to height {replay_tip} in {replay_time:.1?}"
        );
    });
}
