//! A long-running signer's link to the chain (each sidecar role uses one), over CometBFT RPC
//! like any outside client: typed queries of the inference registry and a transaction
//! submitter that tracks its account's sequence.
//!
//! [`Chain::submit`] estimates each tx's gas by simulating it (× [`GasAdjustment::DEFAULT`])
//! and pays the fee that gas costs at the chain's minimum gas price. It signs with the cached
//! sequence and increments it once `CheckTx` accepts,
//! so several submissions can be in flight; on a sequence mismatch (auth 7 or 8, e.g. another
//! process of the same account — a host's ML node, transfer agent and validator worker share
//! it — or a tx that never made it into a block) it takes the sequence the node says it expects
//! (which counts the node's mempool; the committed account may lag behind it) or re-reads the
//! account, and signs again, up to [`SEQUENCE_RETRIES`] times.

use gonka_proto::query as q;
use std::path::Path;
use std::time::Duration;

use crate::{Any, Client, GasAdjustment, GasPrice, Included, Key, SignerData, TxRejected};
use anyhow::{bail, Context, Result};
use gonka_proto::inference as pb;
use tokio::sync::Mutex;

/// Re-signing attempts after a sequence mismatch.
pub const SEQUENCE_RETRIES: u32 = 8;

/// An account key read from a file holding its BIP-39 mnemonic.
pub fn key_from_mnemonic_file(path: &Path) -> Result<Key> {
    let mnemonic = std::fs::read_to_string(path).with_context(|| {
        format!(
            "reading the mnemonic file {}; write the account's 24 words there (mode 0600)",
            path.display()
        )
    })?;
    Key::from_mnemonic(&mnemonic)
        .with_context(|| format!("the mnemonic in {} is not valid", path.display()))
}

/// A connected chain client with a signing account.
pub struct Chain {
    client: Client,
    key: Key,
    chain_id: String,
    gas_price: GasPrice,
    next: Mutex<Option<SignerData>>,
}

/// What the chain did with a submitted transaction ([`Chain::submit_for_outcome`]).
#[derive(Debug)]
pub enum TxOutcome {
    /// Included and executed with code 0.
    Executed(Included),
    /// Refused, with the chain's reason (`codespace code: log`); retrying the same tx is
    /// pointless.
    Refused(String),
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("rpc", &self.client.url())
            .field("address", &self.key.address())
            .field("chain_id", &self.chain_id)
            .finish_non_exhaustive()
    }
}

impl Chain {
    /// Connects to the CometBFT RPC at `rpc_url` and learns the chain id and its minimum gas
    /// price, which every tx pays.
    pub async fn connect(rpc_url: &str, key: Key) -> Result<Chain> {
        let client = Client::new(rpc_url)?;
        let chain_id = client.chain_id().await?;
        let gas_price = client.min_gas_price().await?;
        Ok(Chain {
            client,
            key,
            chain_id,
            gas_price,
            next: Mutex::new(None),
        })
    }

    /// The RPC client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The signing account's address.
    pub fn address(&self) -> &str {
        self.key.address()
    }

    /// The signing account's key (it also signs the TA's calls of ML nodes).
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The signing account's compressed public key.
    pub fn pubkey(&self) -> Vec<u8> {
        self.key.public_key().to_bytes()
    }

    /// The chain id.
    pub fn chain_id(&self) -> &str {
        &self.chain_id
    }

    /// Signs `msgs`, broadcasts them and waits up to `timeout` for inclusion. A tx included
    /// with a non-zero code is returned as `Ok` (it paid its fee); a `CheckTx` refusal other
    /// than a sequence mismatch is an error carrying [`TxRejected`].
    pub async fn submit(&self, msgs: Vec<Any>, timeout: Duration) -> Result<Included> {
        let mut attempt = 0;
        let hash = loop {
            let mut next = self.next.lock().await;
            let signer = match next.as_mut() {
                Some(s) => s,
                None => next.insert(
                    self.client
                        .signer_data(self.key.address(), Some(&self.chain_id))
                        .await?,
                ),
            };
            // A refused simulation is a refusal like CheckTx's (a sequence mismatch included).
            let sent = match self
                .client
                .sign_with_estimated_gas(
                    &self.key,
                    msgs.clone(),
                    signer,
                    "",
                    GasAdjustment::DEFAULT,
                    &self.gas_price,
                )
                .await
            {
                Ok((tx, _fee)) => self.client.broadcast(tx).await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(hash) => {
                    signer.sequence += 1;
                    break hash;
                }
                Err(e)
                    if attempt < SEQUENCE_RETRIES
                        && e.downcast_ref::<TxRejected>()
                            .is_some_and(TxRejected::is_sequence_mismatch) =>
                {
                    attempt += 1;
                    let expected = e
                        .downcast_ref::<TxRejected>()
                        .and_then(TxRejected::expected_sequence);
                    tracing::info!(attempt, ?expected, "sequence mismatch; signing again");
                    match expected {
                        Some(sequence) => signer.sequence = sequence,
                        None => *next = None,
                    }
                    drop(next);
                    // Another process of this account may be signing too: let it go first.
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(e) => return Err(e),
            }
        };
        self.client.wait_for_tx(hash, timeout).await
    }

    /// [`Chain::submit`], telling what the chain did: executed the tx, or refused it (in
    /// `CheckTx`, or included with a non-zero code), with its reason as
    /// `codespace code: log`. `Err` only when the chain could not be reached or did not
    /// include the tx in time, which is worth retrying (a sequence mismatch left after
    /// [`Chain::submit`]'s own retries counts as that too).
    pub async fn submit_for_outcome(&self, msgs: Vec<Any>, timeout: Duration) -> Result<TxOutcome> {
        match self.submit(msgs, timeout).await {
            Ok(included) if included.code == 0 => Ok(TxOutcome::Executed(included)),
            Ok(included) => Ok(TxOutcome::Refused(format!(
                "{} {}: {}",
                included.codespace, included.code, included.log
            ))),
            Err(e) => match e.downcast_ref::<TxRejected>() {
                Some(r) if !r.is_sequence_mismatch() => Ok(TxOutcome::Refused(format!(
                    "{} {}: {}",
                    r.codespace, r.code, r.log
                ))),
                _ => Err(e),
            },
        }
    }

    /// The chain's model table (every page).
    pub async fn models(&self) -> Result<Vec<pb::Model>> {
        self.client
            .query_all::<q::inference::Models>(Default::default())
            .await
    }

    /// Every registered ML node (every page).
    pub async fn nodes(&self) -> Result<Vec<pb::Node>> {
        self.client
            .query_all::<q::inference::Nodes>(Default::default())
            .await
    }

    /// Every registered transfer agent (every page).
    pub async fn transfer_agents(&self) -> Result<Vec<pb::TransferAgent>> {
        self.client
            .query_all::<q::inference::TransferAgents>(Default::default())
            .await
    }

    /// The inference module's parameters.
    pub async fn inference_params(&self) -> Result<pb::Params> {
        match self
            .client
            .query::<q::inference::Params>(&pb::QueryParamsRequest {})
            .await?
            .params
        {
            Some(params) => Ok(params),
            None => bail!("the chain answered /inference/params without parameters"),
        }
    }
}
