//! The TA's background work beside the HTTP front: registering itself on chain, following the
//! chain's registry, and polling the ML nodes' own load reports.

use std::sync::Arc;
use std::time::Duration;

use gonka_client::tx::msg_register_transfer_agent;
use gonka_client::TxRejected;

use super::registry::refresh_from_chain;
use super::TransferAgent;
use gonka_client::http as upstream;
use gonka_client::Chain;

/// Registers (or re-registers) this TA at `url` on chain unless the chain already lists it
/// with the same URL and key. Retries every 2 s while the chain cannot be reached or the
/// account's sequence races another process; a refusal that will not heal by itself (e.g. the
/// account is not staked) is logged and retried every 30 s, so the operator can fix it without
/// restarting the TA.
pub async fn register_self(chain: &Chain, url: &str) {
    loop {
        let listed = match chain.transfer_agents().await {
            Ok(tas) => tas.iter().any(|t| {
                t.address == chain.address() && t.url == url && t.pubkey == chain.pubkey()
            }),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read the transfer agents on chain; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        if listed {
            tracing::info!(address = %chain.address(), %url, "registered on chain as a transfer agent");
            return;
        }
        let msg = msg_register_transfer_agent(chain.address(), url, &chain.pubkey());
        match chain.submit(vec![msg], Duration::from_secs(30)).await {
            Ok(included) if included.code == 0 => {}
            Ok(included) => {
                tracing::error!(codespace = %included.codespace, code = included.code, log = %included.log, "the chain refused this transfer agent's registration; retrying in 30 s");
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            Err(e) => match e.downcast_ref::<TxRejected>() {
                Some(r) if !r.is_sequence_mismatch() => {
                    tracing::error!(codespace = %r.codespace, code = r.code, log = %r.log, "the chain refused this transfer agent's registration; retrying in 30 s");
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                _ => {
                    tracing::warn!(error = %format!("{e:#}"), "registering the transfer agent failed; retrying in 2 s");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
            },
        }
    }
}

/// Re-reads the chain's registry every `every` and hands it to the TA.
pub async fn follow_registry(ta: Arc<TransferAgent>, chain: Arc<Chain>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match refresh_from_chain(&chain).await {
            Ok(registry) => ta.set_registry(registry),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot refresh the registry from chain; keeping the last one")
            }
        }
    }
}

/// `GET /v1/load` of an ML node: its own count of requests in flight.
#[derive(serde::Deserialize)]
struct LoadReport {
    in_flight: u32,
}

/// Asks every node for its load every `every` and records the answers; nodes that do not
/// answer keep their last report (failures are the routing's business, not this poll's).
pub async fn poll_loads(ta: Arc<TransferAgent>, every: Duration, timeout: Duration) {
    loop {
        tokio::time::sleep(every).await;
        for (node, authority) in ta.node_authorities() {
            let report = async {
                let limits = upstream::Limits {
                    connect: timeout,
                    first_byte: timeout,
                    idle: timeout,
                    total: timeout,
                    max_body: 4096,
                };
                let response = upstream::request(&authority, "GET", "/v1/load", b"", limits)
                    .await
                    .ok()?;
                let body = response.read_body().await.ok()?;
                serde_json::from_slice::<LoadReport>(&body).ok()
            };
            if let Ok(Some(report)) = tokio::time::timeout(timeout, report).await {
                ta.report_load(&node, report.in_flight);
            }
        }
    }
}
