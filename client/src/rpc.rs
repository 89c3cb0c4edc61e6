//! Typed calls to a gonka node over CometBFT RPC.

use gonka_proto::query as q;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gonka_proto::auth::{Account, QueryAccountRequest};
use gonka_proto::bank::QueryBalanceRequest;
use gonka_proto::query::Query;
use prost::{Message, Name};
use tendermint::Hash;
use tendermint_rpc::client::CompatMode;
use tendermint_rpc::{Client as _, HttpClient};

use crate::tx::{sign, GasAdjustment, GasFee, GasPrice};
use crate::{Any, Key, SignerData};

/// A transaction as included in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Included {
    /// Transaction hash (uppercase hex, as CometBFT prints it).
    pub hash: String,
    /// Height of the block that includes it.
    pub height: u64,
    /// Result code; zero is success.
    pub code: u32,
    /// Codespace of a non-zero code.
    pub codespace: String,
    /// Log of a failure.
    pub log: String,
    /// The tx's events, in order: `(kind, [(key, value)])`.
    pub events: Vec<(String, Vec<(String, String)>)>,
    /// The tx's gas limit.
    pub gas_wanted: u64,
    /// Gas the tx used (past `gas_wanted` if it ran out).
    pub gas_used: u64,
}

/// An RPC connection to one node.
#[derive(Clone)]
pub struct Client {
    http: HttpClient,
    url: String,
    /// The committed height queries read (`None`: the latest).
    height: Option<u64>,
}

/// An `abci_query` answered with a non-zero code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// Module codespace.
    pub codespace: String,
    /// Error code.
    pub code: u32,
    /// What went wrong.
    pub log: String,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "query failed ({} {}): {}",
            self.codespace, self.code, self.log
        )
    }
}

impl std::error::Error for QueryError {}

/// A transaction the node's `CheckTx` refused (nothing was included, no fee was paid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxRejected {
    /// Module codespace.
    pub codespace: String,
    /// Error code.
    pub code: u32,
    /// What went wrong.
    pub log: String,
}

impl TxRejected {
    /// Whether the rejection is a sequence mismatch (auth 7 or 8): re-read the account's
    /// sequence and sign again.
    pub fn is_sequence_mismatch(&self) -> bool {
        self.codespace == "auth" && matches!(self.code, 7 | 8)
    }

    /// For a sequence mismatch, the sequence the node expects next, as its log states it
    /// ("... the next sequence is 5" / "... next sequence 5; ..."). It counts txs already in
    /// the node's mempool, which the committed account does not show yet.
    pub fn expected_sequence(&self) -> Option<u64> {
        if !self.is_sequence_mismatch() {
            return None;
        }
        let (_, rest) = self.log.rsplit_once("next sequence ")?;
        let rest = rest.strip_prefix("is ").unwrap_or(rest);
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    }
}

impl TxRejected {
    /// CometBFT's answer to a tx its mempool cache already holds (these exact bytes were
    /// submitted before: pending or included), which it gives as a bare JSON-RPC "Internal
    /// error" before the app sees the tx, as the Cosmos SDK codes it (`sdk` 19); `None` for
    /// any other RPC error.
    pub fn of_rpc_error(error: &tendermint_rpc::Error) -> Option<TxRejected> {
        error
            .to_string()
            .contains("tx already exists in cache")
            .then(|| TxRejected {
                codespace: "sdk".into(),
                code: 19,
                log: "this exact tx was already submitted (the node's mempool cache holds it): it is pending or included; look it up by its hash".into(),
            })
    }
}

impl std::fmt::Display for TxRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tx rejected by the node ({} {}): {}",
            self.codespace, self.code, self.log
        )
    }
}

impl std::error::Error for TxRejected {}

impl Client {
    /// Connects to the node RPC at `url` (e.g. `http://127.0.0.1:26657`).
    pub fn new(url: &str) -> Result<Client> {
        let parsed = url
            .parse()
            .with_context(|| format!("{url:?} is not a valid RPC URL"))?;
        let http = HttpClient::builder(parsed)
            .compat_mode(CompatMode::V0_38)
            .timeout(Duration::from_secs(10))
            .build()
            .with_context(|| format!("cannot create an RPC client for {url}"))?;
        Ok(Client {
            http,
            url: url.to_string(),
            height: None,
        })
    }

    /// This client reading chain state as committed at `height` (0: the latest) in its
    /// queries. The chain answers queries of single items at any committed height; lists
    /// exist at the latest height only.
    pub fn at_height(mut self, height: u64) -> Client {
        self.height = (height > 0).then_some(height);
        self
    }

    /// The node's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The underlying tendermint-rpc client, for calls not wrapped here.
    pub fn http(&self) -> &HttpClient {
        &self.http
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> anyhow::Error {
        anyhow!(
            "node {} did not answer: {e}; is it running? (check --node)",
            self.url
        )
    }

    /// Node status (chain id, latest height and app hash).
    pub async fn status(&self) -> Result<tendermint_rpc::endpoint::status::Response> {
        self.http.status().await.map_err(|e| self.unreachable(e))
    }

    /// Chain id the node reports.
    pub async fn chain_id(&self) -> Result<String> {
        Ok(self.status().await?.node_info.network.to_string())
    }

    /// Runs `abci_query` (at the latest height, or at [`Client::at_height`]'s); a non-zero
    /// code becomes a [`QueryError`].
    pub async fn query_raw(&self, path: &str, data: Vec<u8>) -> Result<Vec<u8>> {
        Ok(self.query_raw_with_height(path, data).await?.1)
    }

    /// [`Client::query_raw`] with the height whose state answered it.
    async fn query_raw_with_height(&self, path: &str, data: Vec<u8>) -> Result<(u64, Vec<u8>)> {
        let response = self
            .http
            .abci_query(
                Some(path.to_string()),
                data,
                self.height
                    .map(tendermint::block::Height::try_from)
                    .transpose()?,
                false,
            )
            .await
            .map_err(|e| self.unreachable(e))?;
        if response.code.is_err() {
            return Err(QueryError {
                codespace: response.codespace,
                code: response.code.value(),
                log: response.log,
            }
            .into());
        }
        Ok((response.height.value(), response.value))
    }

    /// Asks the chain query `Q` (a `gonka_proto::query` marker, which names the path and
    /// both message types); a non-zero code becomes a [`QueryError`].
    pub async fn query<Q: Query>(&self, request: &Q::Request) -> Result<Q::Response> {
        Ok(self.query_with_height::<Q>(request).await?.1)
    }

    /// [`Client::query`] with the height whose state answered it.
    pub async fn query_with_height<Q: Query>(
        &self,
        request: &Q::Request,
    ) -> Result<(u64, Q::Response)> {
        let (height, bytes) = self
            .query_raw_with_height(Q::PATH, request.encode_to_vec())
            .await?;
        let response = Q::Response::decode(bytes.as_slice()).with_context(|| {
            format!(
                "the answer of {} to {} is not a valid {}; do client and node versions match?",
                self.url,
                Q::PATH,
                <Q::Response as Name>::full_name()
            )
        })?;
        Ok((height, response))
    }

    /// Every item of the list query `Q`: asks page after page (each of the largest size,
    /// [`q::page::MAX_LIMIT`]) from the key the previous page handed out, until a page
    /// says the list is complete. Each page is read at the chain's latest height, so a list
    /// that changes meanwhile may miss an item added behind the pages already read.
    pub async fn query_all<Q: q::ListQuery>(
        &self,
        mut request: Q::Request,
    ) -> Result<Vec<Q::Item>> {
        let mut items = Vec::new();
        let mut key = Vec::new();
        loop {
            *Q::page(&mut request) = Some(q::page::PageRequest {
                key: key.clone(),
                limit: q::page::MAX_LIMIT,
            });
            let response = self.query::<Q>(&request).await?;
            let next = Q::next_key(&response).to_vec();
            items.extend(Q::items(response));
            if next.is_empty() {
                return Ok(items);
            }
            // Keys go forward only; one that does not would loop forever.
            if next <= key {
                bail!(
                    "{} answered {} with a next page key that does not move forward",
                    self.url,
                    Q::PATH
                );
            }
            key = next;
        }
    }

    /// The account at `address`, `None` if it does not exist.
    pub async fn account(&self, address: &str) -> Result<Option<Account>> {
        let request = QueryAccountRequest {
            address: address.into(),
        };
        match self.query::<q::auth::Account>(&request).await {
            Ok(response) => Ok(response.account),
            Err(e)
                if e.downcast_ref::<QueryError>()
                    .is_some_and(|q| q.log.contains("NotFound")) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Balance of `denom` held by `address`.
    pub async fn balance(&self, address: &str, denom: &str) -> Result<u128> {
        let request = QueryBalanceRequest {
            address: address.into(),
            denom: denom.into(),
        };
        let coin = self
            .query::<q::bank::Balance>(&request)
            .await?
            .balance
            .unwrap_or_default();
        coin.amount
            .parse()
            .with_context(|| format!("node returned a malformed amount {:?}", coin.amount))
    }

    /// Chain id, account number and next sequence of `address`, for signing.
    pub async fn signer_data(&self, address: &str, chain_id: Option<&str>) -> Result<SignerData> {
        let chain_id = match chain_id {
            Some(id) => id.to_string(),
            None => self.chain_id().await?,
        };
        let account = self.account(address).await?.ok_or_else(|| {
            anyhow!("account {address} does not exist on chain yet; fund it first")
        })?;
        Ok(SignerData {
            chain_id,
            account_number: account.account_number,
            sequence: account.sequence,
        })
    }

    /// The chain's minimum gas price (auth parameters): every tx's fee must be at least
    /// ceil(gas limit × this).
    pub async fn min_gas_price(&self) -> Result<GasPrice> {
        let params = self
            .query::<q::auth::Params>(&Default::default())
            .await?
            .params
            .ok_or_else(|| anyhow!("the chain answered /auth/params without parameters"))?;
        GasPrice::parse(&params.min_gas_price).map_err(|e| {
            anyhow!(
                "the chain's min_gas_price is malformed ({e}); do client and node versions match?"
            )
        })
    }

    /// The gas `tx` uses on the node's mempool state now, by the
    /// `/cosmos.tx.v1beta1.Service/Simulate` query (the signature is not checked, so a tx
    /// signed with [`GasFee::SIMULATION`] will do). A tx the chain would refuse fails with
    /// [`TxRejected`] carrying the chain's code and log, as `CheckTx` would.
    pub async fn simulate(&self, tx: Vec<u8>) -> Result<u64> {
        let request = cosmrs::proto::cosmos::tx::v1beta1::SimulateRequest {
            tx_bytes: tx,
            ..Default::default()
        };
        match self.query::<q::cosmos::Simulate>(&request).await {
            Ok(response) => Ok(response.gas_info.unwrap_or_default().gas_used),
            Err(e) => match e.downcast::<QueryError>() {
                Ok(refused) => Err(TxRejected {
                    codespace: refused.codespace,
                    code: refused.code,
                    log: refused.log,
                }
                .into()),
                Err(e) => Err(e),
            },
        }
    }

    /// Signs `msgs` with a gas limit of `adjustment` × the gas a simulation of them uses, and
    /// the fee that limit costs at `price` (the chain's minimum gas price, or more).
    pub async fn sign_with_estimated_gas(
        &self,
        key: &Key,
        msgs: Vec<Any>,
        signer: &SignerData,
        memo: &str,
        adjustment: GasAdjustment,
        price: &GasPrice,
    ) -> Result<(Vec<u8>, GasFee)> {
        let probe = sign(key, msgs.clone(), signer, GasFee::SIMULATION, memo)?;
        let gas_used = self.simulate(probe).await?;
        let fee = GasFee::at_price(adjustment.apply(gas_used), price)?;
        Ok((sign(key, msgs, signer, fee, memo)?, fee))
    }

    /// Broadcasts `tx` with `broadcast_tx_sync`; fails with [`TxRejected`] if `CheckTx`
    /// rejects it. Returns the tx hash.
    pub async fn broadcast(&self, tx: Vec<u8>) -> Result<Hash> {
        let response = self.http.broadcast_tx_sync(tx).await.map_err(|e| {
            match TxRejected::of_rpc_error(&e) {
                Some(duplicate) => duplicate.into(),
                None => self.unreachable(e),
            }
        })?;
        if response.code.is_err() {
            return Err(TxRejected {
                codespace: response.codespace,
                code: response.code.value(),
                log: response.log,
            }
            .into());
        }
        Ok(response.hash)
    }

    /// Looks up an included tx by hash; `None` while it is not in a block yet.
    pub async fn find_tx(&self, hash: Hash) -> Result<Option<Included>> {
        match self.http.tx(hash, false).await {
            Ok(found) => Ok(Some(Included {
                hash: found.hash.to_string(),
                height: found.height.value(),
                code: found.tx_result.code.value(),
                codespace: found.tx_result.codespace,
                log: found.tx_result.log,
                events: found
                    .tx_result
                    .events
                    .into_iter()
                    .map(|event| {
                        let attributes = event
                            .attributes
                            .iter()
                            .map(|a| {
                                let text = |r: Result<&str, _>| r.unwrap_or_default().to_string();
                                (text(a.key_str()), text(a.value_str()))
                            })
                            .collect();
                        (event.kind, attributes)
                    })
                    .collect(),
                gas_wanted: u64::try_from(found.tx_result.gas_wanted).unwrap_or(0),
                gas_used: u64::try_from(found.tx_result.gas_used).unwrap_or(0),
            })),
            Err(e) if e.to_string().contains("not found") => Ok(None),
            Err(e) => Err(self.unreachable(e)),
        }
    }

    /// Waits until the tx with `hash` is included, up to `timeout`.
    pub async fn wait_for_tx(&self, hash: Hash, timeout: Duration) -> Result<Included> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(included) = self.find_tx(hash).await? {
                return Ok(included);
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("tx {hash} was accepted but not included within {timeout:?}; query it later with `gonkad query tx {hash}`");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Broadcasts `tx` and waits for its inclusion.
    pub async fn broadcast_and_wait(&self, tx: Vec<u8>, timeout: Duration) -> Result<Included> {
        let hash = self.broadcast(tx).await?;
        self.wait_for_tx(hash, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::TxRejected;

    #[test]
    fn expected_sequence_comes_from_the_log() {
        let rejected = |code, log: &str| TxRejected {
            codespace: "auth".into(),
            code,
            log: log.into(),
        };
        let replayed = rejected(
            7,
            "sequence 0 was already used by gonka1x; the next sequence is 12",
        );
        assert_eq!(replayed.expected_sequence(), Some(12));
        let ahead = rejected(
            8,
            "sequence 9 is ahead of gonka1x's next sequence 3; send the earlier txs first",
        );
        assert_eq!(ahead.expected_sequence(), Some(3));
        assert_eq!(
            rejected(4, "the next sequence is 1").expected_sequence(),
            None
        );
    }
}
