//! The inference network end to end: 4 validators, each running an ML node (the reference
//! model) that registers itself on chain, two of them also running a transfer agent. With ML
//! nodes 0 and 1 killed, a signed chat request through TA 0 fails over to node 2's or node 3's
//! ML node and is served; an account without an escrow gets 402 and an absurd `max_tokens`
//! 400; with TA 0 killed, `gonkad chat` fails over to TA 1 and streams the answer. How the
//! served requests settle (committed batches, exact payments, a TA killed with SIGKILL) is
//! the settlement test's (`settlement.rs`).
//!
//! Epochs are long enough that no epoch ends during the test, and the validator role is off.

use gonka_proto::query as q;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gonka_app::genesis::{GenesisAccount, GenesisConfig, GenesisEscrow};
use gonka_client::chat::{ChatClient, ChatError, ChatRequest, Message};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::Key;
use gonka_localnet::{AppStateFn, GenesisValidatorKey, SidecarConfig};
use gonka_proto::inference::{
    Model, QueryNodesRequest, QueryRecordRequest, QueryTransferAgentsRequest, StoredRecord,
};
use gonka_proto::stake::QueryWorkRequest;

use crate::support::{addr, gonkad, scrape, stake_validators, Net, START_BALANCE, VALIDATORS};

/// ngnk per GNK.
pub const GNK: u128 = 1_000_000_000;
/// The model every ML node serves.
pub const MODEL: &str = "gonka/reference-1";
/// Its price per token in ngnk.
pub const PRICE: u128 = 3;
/// Commission the requester signs for the TA.
pub const COMMISSION: u128 = 7;
/// Bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

/// Genesis: alice funded, the validators staked (as `gonkad localnet` does), the reference
/// model priced, epochs too long to end during the test.
pub fn genesis(keys: &[GenesisValidatorKey], epoch_length: u64) -> serde_json::Value {
    genesis_config(keys, epoch_length).app_state()
}

/// The configuration of [`genesis`], to adjust.
pub fn genesis_config(keys: &[GenesisValidatorKey], epoch_length: u64) -> GenesisConfig {
    let mut config = GenesisConfig {
        accounts: vec![GenesisAccount {
            address: addr("alice"),
            ngnk: START_BALANCE,
        }],
        min_gas_price: Some(crate::support::min_gas_price()),
        epoch_length: Some(epoch_length),
        models: vec![Model {
            id: MODEL.into(),
            price_per_token: PRICE.to_string(),
            ..Model::default()
        }],
        ..Default::default()
    };
    stake_validators(&mut config, keys, 10_000 * GNK);
    config
}

/// Alice's genesis escrow of 1 GNK for the transfer agent of validator `index`.
pub fn alice_escrow(index: usize) -> GenesisEscrow {
    GenesisEscrow {
        requester: addr("alice"),
        transfer_agent: addr(&format!("validator{index}")),
        ngnk: GNK,
        expires_at: 1_000_000,
    }
}

/// A temporary keyring home holding alice's well-known key (`gonkad keys import`).
pub fn keyring_with_alice() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let import = gonkad(&[
        "--home",
        home.path().to_str().unwrap(),
        "keys",
        "import",
        "alice",
        "--mnemonic",
        &well_known_mnemonic("alice"),
    ]);
    assert!(import.status.success(), "{import:?}");
    home
}

/// Sidecars for the 4 validators, run as their operator accounts.
pub fn sidecars() -> SidecarConfig {
    let binary = Path::new(env!("CARGO_BIN_EXE_gonkad")).with_file_name("gonka-sidecar");
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p gonka-sidecar` (scripts/test.sh does)",
        binary.display()
    );
    let mnemonics = (0..VALIDATORS)
        .map(|i| well_known_mnemonic(&format!("validator{i}")))
        .collect();
    SidecarConfig::new(binary, mnemonics)
}

/// Polls `check` until it returns `Some`, failing after [`WAIT`] with `what`.
pub async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The validation of record `id` once decided (neither awaiting the validator nor the
/// reveal), polled with [`eventually`].
pub async fn decided_validation(net: &Net, id: &str) -> gonka_proto::disputes::Validation {
    eventually(&format!("the validation of {id}"), || async {
        net.clients[0]
            .query::<q::disputes::Validation>(&gonka_proto::disputes::QueryValidationRequest {
                inference_id: id.to_string(),
            })
            .await
            .ok()?
            .validation
            .filter(|v| !["pending", "committed"].contains(&v.status.as_str()))
    })
    .await
}

/// The balance in ngnk of alice's escrow with the transfer agent `ta` (an address).
pub async fn alice_escrow_balance(net: &Net, ta: &str) -> u128 {
    let escrow = net.clients[0]
        .query::<q::settlement::Escrow>(&gonka_proto::settlement::QueryEscrowRequest {
            requester: addr("alice"),
            transfer_agent: ta.to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("alice's escrow with {ta}: {e:#}"))
        .escrow
        .unwrap_or_else(|| panic!("alice has no escrow with {ta}"));
    escrow.balance.parse().unwrap()
}

/// Registers each validator's BLS key, as the validator role would: the executors' hosts
/// co-sign settlement batches with them.
pub async fn register_bls_keys(net: &Net) {
    for i in 0..VALIDATORS {
        let label = format!("validator{i}");
        let msg = gonka_client::bls::msg_register_bls_key(
            &addr(&label),
            crate::support::CHAIN_ID,
            &gonka_client::bls::account_bls_key(crate::support::key(&label)),
        );
        net.tx_ok(0, &label, vec![msg], "BLS key").await;
    }
}

/// Waits until the 4 ML nodes and 2 transfer agents are registered on chain and the TAs know
/// them.
pub async fn wait_for_registry(net: &Net) {
    eventually("4 ML nodes and 2 transfer agents on chain", || async {
        let nodes = net.clients[0]
            .query::<q::inference::Nodes>(&QueryNodesRequest::default())
            .await
            .ok()?
            .nodes;
        let tas = net.clients[0]
            .query::<q::inference::TransferAgents>(&QueryTransferAgentsRequest::default())
            .await
            .ok()?
            .transfer_agents;
        (nodes.len() == VALIDATORS && tas.len() == 2).then_some(())
    })
    .await;
    // The TAs re-read the registry every 2 s (`--registry-refresh-ms`): wait until each one's
    // router holds the 4 ML nodes (its per-node gauge lists every node it routes to).
    for url in net.net.transfer_agent_urls() {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .parse()
            .unwrap();
        eventually(
            &format!("the TA at {url} routing to 4 ML nodes"),
            || async {
                let routed = tokio::task::block_in_place(|| scrape(addr))
                    .keys()
                    .filter(|k| k.starts_with("gonka_ta_node_in_flight{"))
                    .count();
                (routed == VALIDATORS).then_some(())
            },
        )
        .await;
    }
}

/// Kills the ML nodes of validators 0 and 1 (SIGKILL), so nodes 2 and 3 serve: their hosts
/// send no transactions, so their balances move only by what the test checks.
pub fn kill_ml_nodes_0_and_1(net: &mut Net) {
    for i in [0, 1] {
        tokio::task::block_in_place(|| net.net.kill_sidecar(i, "ml-node"))
            .unwrap_or_else(|e| panic!("{e:#}"));
    }
}

/// The stored work record of `inference_id`, once it is on chain.
pub async fn settled(net: &Net, inference_id: &str) -> StoredRecord {
    eventually(&format!("work record {inference_id} on chain"), || async {
        let request = QueryRecordRequest {
            inference_id: inference_id.to_string(),
        };
        net.clients[1]
            .query::<q::inference::Record>(&request)
            .await
            .ok()?
            .record
    })
    .await
}

/// Work units credited to `operator` in `epoch`.
pub async fn work_units(net: &Net, epoch: u64, operator: &str) -> u64 {
    net.clients[2]
        .query::<q::stake::Work>(&QueryWorkRequest {
            epoch,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
        .credits
        .iter()
        .filter(|w| w.operator == operator)
        .map(|w| w.units)
        .sum()
}

#[test]
fn signed_chat_requests_fail_over_between_ml_nodes_and_between_transfer_agents() {
    crate::support::run(async {
        let mut net = Net::start_with("inference", VALIDATORS, |config| {
            // Alice holds an escrow for both transfer agents (validators 0 and 1).
            config.app_state_for_validators = Some(AppStateFn(Arc::new(|keys| {
                let mut genesis = genesis_config(keys, 100_000);
                genesis.escrows = (0..2).map(alice_escrow).collect();
                genesis.app_state()
            })));
            config.sidecar = Some(sidecars());
        })
        .await;
        wait_for_registry(&net).await;
        kill_ml_nodes_0_and_1(&mut net);
        let tas = net.net.transfer_agent_urls();
        assert_eq!(tas.len(), 2);

        // A signed, non-streamed request through TA 0: ML nodes 0 and 1 are down, so the TA
        // retries and node 2's or node 3's ML node serves it.
        let alice = Key::from_mnemonic(&well_known_mnemonic("alice")).unwrap();
        let client = ChatClient::new(alice, &tas).unwrap();
        let mut request = ChatRequest::new(MODEL, vec![Message::user("Hello, gonka")]);
        request.max_tokens = Some(16);
        request.stream = false;
        request.commission = COMMISSION;
        let answer = client
            .chat(&request, |_| {})
            .await
            .unwrap_or_else(|e| panic!("chat through {tas:?}: {e}"));
        assert!(!answer.content.is_empty());
        assert_eq!(
            answer.transfer_agent,
            tas[0].trim_end_matches("/v1"),
            "TA 0 serves it (failed over: {:?})",
            answer.failed_over
        );
        let executor = answer.executor.clone().expect("the TA names the executor");
        assert!(
            matches!(executor.as_str(), "node2-ml" | "node3-ml"),
            "ML nodes 0 and 1 are down, yet {executor} served the request"
        );
        let usage = answer.usage.expect("a plain answer carries usage");
        assert!(usage.completion_tokens > 0 && usage.completion_tokens <= 16);
        assert!(answer.inference_id.is_some(), "inference id header");

        // Bad input through the TA: an account without an escrow gets 402, an absurd
        // max_tokens 400; neither reaches an ML node or the chain.
        let broke = Key::from_mnemonic(&well_known_mnemonic("e2e-unfunded")).unwrap();
        let refused = |result: Result<_, ChatError>| match result {
            Err(ChatError::Refused { status, code, .. }) => (status, code.unwrap_or_default()),
            other => panic!("expected a refusal, got {other:?}"),
        };
        let broke_client = ChatClient::new(broke, &tas).unwrap();
        assert_eq!(
            refused(broke_client.chat(&request, |_| {}).await),
            (402, "insufficient_funds".to_string())
        );
        let mut absurd = request.clone();
        absurd.max_tokens = Some(u32::MAX);
        assert_eq!(
            refused(client.chat(&absurd, |_| {}).await),
            (400, "invalid_max_tokens".to_string())
        );

        // Operators see all of it in TA 0's and node 0's app metrics.
        let ta0 = tas[0]
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .parse()
            .unwrap();
        let ta_metrics = scrape(ta0);
        for (status, least) in [("200", 1.0), ("402", 1.0), ("400", 1.0)] {
            let name = format!("gonka_ta_requests_total{{status=\"{status}\"}}");
            assert!(
                ta_metrics.get(&name) >= Some(&least),
                "{name}: {ta_metrics:?}"
            );
        }
        assert!(ta_metrics["gonka_ta_added_seconds_count"] >= 1.0);
        let nodes = ta_metrics
            .keys()
            .filter(|k| k.starts_with("gonka_ta_node_in_flight{"))
            .count();
        assert_eq!(
            nodes, VALIDATORS,
            "one in-flight gauge per registered ML node"
        );
        let node0 = net.node(0);
        let app_metrics = scrape(std::net::SocketAddr::new(
            node0.abci_addr.ip(),
            node0.ports.app_metrics(),
        ));
        assert!(app_metrics["gonka_app_height"] >= 1.0, "{app_metrics:?}");
        assert!(app_metrics["gonka_app_finalize_block_seconds_count"] >= 1.0);
        assert!(app_metrics["gonka_app_txs_total{result=\"ok\"}"] >= 1.0);

        // TA 0 dies: `gonkad chat`, given both TAs, fails over to TA 1 and streams the answer.
        tokio::task::block_in_place(|| net.net.kill_sidecar(0, "transfer-agent"))
            .unwrap_or_else(|e| panic!("{e:#}"));
        let home = keyring_with_alice();
        let home = home.path().to_str().unwrap();
        let out = gonkad(&[
            "--home",
            home,
            "--node",
            &net.node(0).rpc_url,
            "chat",
            "--from",
            "alice",
            "--ta",
            &tas[0],
            "--ta",
            &tas[1],
            "--max-tokens",
            "8",
            "--timeout-secs",
            "10",
            "Fail over, please",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "gonkad chat failed:\n{stdout}\n{stderr}"
        );
        assert!(!stdout.trim().is_empty(), "streamed content: {stderr}");
        assert!(stderr.contains("skipped TA"), "{stderr}");
        assert!(stderr.contains("inference "), "{stderr}");
    });
}
