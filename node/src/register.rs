//! Registration of the ML node on chain, run in the background once the node listens.
//!
//! The node asks the chain for its id (`/inference/node`): absent, it sends
//! `MsgRegisterNode`; registered by its host but different from what it serves now (models,
//! capacity, endpoint, response key), `MsgUpdateNode`; identical, nothing. The host's account
//! (a staked participant) signs the tx.
//!
//! Failures that heal by themselves (the chain is not reachable yet, a sequence mismatch
//! because another tx of the host's account was in flight, a tx not included in time) are
//! retried every [`RETRY_SOON`]. Refusals that need an operator (the host is not staked, the
//! model is not priced, the id belongs to another host, the account does not exist) are
//! logged as errors with the chain's log line and retried every [`RETRY_LATER`], so the node
//! registers by itself once the operator fixes the cause.

use gonka_proto::query as q;
use std::time::Duration;

use gonka_client::rpc::QueryError;
use gonka_client::{
    msg_register_node, msg_update_node, node_key_proof, Any, Client, GasAdjustment, Key, NodeSpec,
    SignerData, TxRejected,
};
use gonka_proto::inference::{Node, QueryNodeRequest};
use k256::ecdsa::SigningKey;

/// Pause before retrying a failure that heals by itself.
pub const RETRY_SOON: Duration = Duration::from_secs(2);
/// Pause before retrying a refusal that needs an operator.
pub const RETRY_LATER: Duration = Duration::from_secs(30);
/// Longest wait for a registration tx to be included in a block.
const INCLUSION_TIMEOUT: Duration = Duration::from_secs(30);
/// `inference` error code of an unregistered node id (`InferenceError::UnknownNode`).
const UNKNOWN_NODE: u32 = 8;

/// What the node registers, and with which account.
pub struct Registration {
    /// RPC client of the chain (CometBFT RPC).
    pub client: Client,
    /// The host's account key; a staked participant.
    pub host: Key,
    /// The node as it should be registered (its `host` is the key's address; its
    /// `key_proof` is made on the chain's id before each attempt). Its txs pay the gas a
    /// simulation estimates at the chain's minimum gas price.
    pub node: Node,
    /// The node's response key, which proves possession of `node.pubkey`.
    pub node_key: SigningKey,
}

/// The message that makes the chain's record of the node equal `desired` hosted by `host`:
/// `MsgRegisterNode` when `existing` is `None`, `MsgUpdateNode` when the registered node of
/// `host` differs, and `None` when it is already identical, or when the id is registered by
/// another host (the chain would refuse either message).
pub fn registration_msg(existing: Option<&Node>, desired: &Node, host: &str) -> Option<Any> {
    let mut node = Node {
        host: host.to_string(),
        ..desired.clone()
    };
    node.models.sort(); // the chain stores the models sorted
    let spec = NodeSpec::of(&node);
    match existing {
        None => Some(msg_register_node(host, &spec)),
        Some(registered) if registered.host != host || *registered == node => None,
        Some(_) => Some(msg_update_node(host, &spec)),
    }
}

/// Why an attempt did not end with the node registered as desired.
enum Failure {
    /// Heals by itself: retry after [`RETRY_SOON`].
    Transient(String),
    /// Needs an operator: log as an error and retry after [`RETRY_LATER`].
    Refused(String),
}

/// Registers (or updates) the node, retrying until the chain holds it as desired.
pub async fn run(registration: Registration) {
    let node_id = registration.node.id.clone();
    tracing::info!(
        node_id = %node_id,
        host = %registration.host.address(),
        chain = %registration.client.url(),
        "registering the ML node on chain"
    );
    loop {
        let pause = match attempt(&registration).await {
            Ok(()) => return,
            Err(Failure::Transient(why)) => {
                tracing::warn!(node_id = %node_id, "registration not done yet: {why}; retrying in {RETRY_SOON:?}");
                RETRY_SOON
            }
            Err(Failure::Refused(why)) => {
                tracing::error!(node_id = %node_id, "registration refused: {why}; retrying in {RETRY_LATER:?}");
                RETRY_LATER
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// One round: query the chain, and send the message that brings it up to date.
async fn attempt(registration: &Registration) -> Result<(), Failure> {
    let Registration {
        client,
        host,
        node,
        node_key,
    } = registration;
    let address = host.address();
    let chain_id = client
        .chain_id()
        .await
        .map_err(|e| Failure::Transient(one_line(&e)))?;
    let node = &Node {
        key_proof: node_key_proof(node_key, &chain_id, address, &node.id),
        ..node.clone()
    };
    let existing = registered_node(client, &node.id).await?;
    if let Some(registered) = existing.as_ref().filter(|n| n.host != address) {
        return Err(Failure::Refused(format!(
            "node id {} is registered by host {}, not by this host {address}; choose another --node-id",
            node.id, registered.host
        )));
    }
    let Some(msg) = registration_msg(existing.as_ref(), node, address) else {
        tracing::info!(node_id = %node.id, "the ML node is registered on chain as configured");
        return Ok(());
    };
    let action = if existing.is_some() {
        "updated"
    } else {
        "registered"
    };
    let signer = signer_data(client, address).await?;
    let price = client
        .min_gas_price()
        .await
        .map_err(|e| Failure::Transient(one_line(&e)))?;
    // The simulation refuses what CheckTx would, with the same codes.
    let sent = match client
        .sign_with_estimated_gas(host, vec![msg], &signer, "", GasAdjustment::DEFAULT, &price)
        .await
    {
        Ok((tx, _fee)) => client.broadcast_and_wait(tx, INCLUSION_TIMEOUT).await,
        Err(e) => Err(e),
    };
    let included = sent.map_err(|e| match e.downcast_ref::<TxRejected>() {
        Some(r) if r.is_sequence_mismatch() => Failure::Transient(format!(
            "sequence mismatch, another tx of {address} was in flight ({r})"
        )),
        Some(r) => Failure::Refused(r.to_string()),
        None => Failure::Transient(one_line(&e)),
    })?;
    if included.code != 0 {
        let rejected = TxRejected {
            codespace: included.codespace,
            code: included.code,
            log: included.log,
        };
        let why = format!(
            "tx {} failed in block {}: {rejected}",
            included.hash, included.height
        );
        return Err(if rejected.is_sequence_mismatch() {
            Failure::Transient(why)
        } else {
            Failure::Refused(why)
        });
    }
    tracing::info!(
        node_id = %node.id,
        tx = %included.hash,
        height = included.height,
        "the ML node is {action} on chain"
    );
    Ok(())
}

/// The node registered under `node_id`, `None` if there is none.
async fn registered_node(client: &Client, node_id: &str) -> Result<Option<Node>, Failure> {
    let request = QueryNodeRequest {
        node_id: node_id.to_string(),
    };
    match client.query::<q::inference::Node>(&request).await {
        Ok(response) => Ok(response.node),
        Err(e) => match e.downcast_ref::<QueryError>() {
            Some(q) if q.codespace == "inference" && q.code == UNKNOWN_NODE => Ok(None),
            Some(q) => Err(Failure::Refused(format!(
                "the chain refused the query /inference/node: {q}"
            ))),
            None => Err(Failure::Transient(one_line(&e))),
        },
    }
}

/// Chain id, account number and sequence of `address`; an account the chain does not know
/// needs an operator (fund it, then stake).
async fn signer_data(client: &Client, address: &str) -> Result<SignerData, Failure> {
    let transient = |e: anyhow::Error| Failure::Transient(one_line(&e));
    let account = client.account(address).await.map_err(transient)?;
    let Some(account) = account else {
        return Err(Failure::Refused(format!(
            "the host account {address} does not exist on chain; fund it and stake it as a participant"
        )));
    };
    Ok(SignerData {
        chain_id: client.chain_id().await.map_err(transient)?,
        account_number: account.account_number,
        sequence: account.sequence,
    })
}

/// An error as one log line. Errors of tendermint-rpc embed an eyre report whose location and
/// (with `RUST_BACKTRACE` set) backtrace would flood the log at every retry; only the
/// messages are kept.
fn one_line(e: &anyhow::Error) -> String {
    format!("{e:#}")
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Location:") && !l.starts_with("Stack backtrace:"))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "gonka1host";

    fn desired() -> Node {
        Node {
            id: "n1".into(),
            host: String::new(),
            models: vec!["b".into(), "a".into()],
            vram_mib: 8,
            bandwidth_mbps: 100,
            max_concurrency: 4,
            endpoint: "http://127.0.0.1:8080".into(),
            pubkey: vec![2; 33],
            key_proof: vec![3; 64],
        }
    }

    fn spec(node: &Node) -> NodeSpec {
        NodeSpec {
            models: vec!["a".into(), "b".into()],
            ..NodeSpec::of(node)
        }
    }

    /// The node as the chain stores it after registering `desired()`.
    fn stored() -> Node {
        Node {
            host: HOST.into(),
            models: vec!["a".into(), "b".into()],
            ..desired()
        }
    }

    #[test]
    fn an_absent_node_is_registered_with_the_host_and_sorted_models() {
        let msg = registration_msg(None, &desired(), HOST);
        assert_eq!(msg, Some(msg_register_node(HOST, &spec(&desired()))));
    }

    #[test]
    fn an_identical_node_needs_nothing() {
        assert_eq!(registration_msg(Some(&stored()), &desired(), HOST), None);
    }

    #[test]
    fn a_changed_node_is_updated() {
        let moved = Node {
            endpoint: "http://10.0.0.2:8080".into(),
            ..desired()
        };
        assert_eq!(
            registration_msg(Some(&stored()), &moved, HOST),
            Some(msg_update_node(HOST, &spec(&moved)))
        );
        let rekeyed = Node {
            pubkey: vec![3; 33],
            ..desired()
        };
        assert_eq!(
            registration_msg(Some(&stored()), &rekeyed, HOST),
            Some(msg_update_node(HOST, &spec(&rekeyed)))
        );
    }

    #[test]
    fn errors_are_logged_on_one_line_without_backtraces() {
        let e = anyhow::anyhow!(
            "node http://x did not answer: HTTP error\n\nCaused by:\n    connection refused\n\nLocation:\n    src/a.rs:1\n\nStack backtrace:\n   0: f"
        );
        assert_eq!(
            one_line(&e),
            "node http://x did not answer: HTTP error Caused by: connection refused"
        );
    }

    #[test]
    fn another_hosts_node_gets_no_message() {
        let foreign = Node {
            host: "gonka1other".into(),
            ..stored()
        };
        assert_eq!(registration_msg(Some(&foreign), &desired(), HOST), None);
    }
}
