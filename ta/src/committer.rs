//! The committer: turns the outbox's pending records into committed
//! batches on chain (x/settlement's `MsgSettleBatch`), one batch in flight at a time.
//!
//! 1. A stored batch not known to be included is settled first (after a crash, the one the
//!    TA was submitting): its signed message is sent again as it is. Batch numbers make
//!    this idempotent: the chain takes number `n` once, so a copy that lands twice is refused
//!    the second time, and a refusal for a wrong number with the chain already at `n` means
//!    an earlier copy landed.
//! 2. Otherwise, once [`CommitPolicy::max_records`] records wait or [`CommitPolicy::interval`]
//!    passed, the oldest pending records within the chain's limits (records, requester and
//!    host lines) become batch `last + 1`: records too old for the chain's
//!    `max_record_age_secs` (less [`RECORD_AGE_MARGIN_SECS`]) are set aside (a leaf that old would
//!    let anyone void the batch and slash the TA); each host's records come from one of its
//!    nodes per batch (a node co-signs only its own receipts; the host's other nodes wait for
//!    a later batch); [`commit`] collects the hosts' co-signatures. The batch is stored —
//!    moving its records out of pending in the same write — before it is submitted.
//!    While a full round of leaf demands or more waits for the TA's answers (the chain samples a
//!    share of every batch's leaves, [`crate::demands`]), no new batch is built.
//! 3. Included: the escrow book takes the debits off, then the outbox stops counting them
//!    as owed. Refused: if the refusal is an escrow that no longer covers a requester, that
//!    requester's records are set aside (with the chain's reason) after asking the chain
//!    again; the other records go back to pending, and the next batch is built afresh.
//!    A refusal for a wrong number while the chain is below it means a copy is still on its
//!    way: the batch is kept and sent again.
//!
//! Included batches are kept to serve their leaves ([`leaves`](crate::leaves)) and answer demands until two
//! challenge windows after their block, then pruned.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use gonka_client::bls::crypto::PublicKey;
use gonka_client::http::Limits;
use gonka_client::rpc::QueryError;
use gonka_client::settlement::{msg_settle_batch, Served, RECORD_AGE_MARGIN_SECS};
use gonka_client::{Chain, TxOutcome};
use gonka_proto::bls::QueryKeyRequest;
use gonka_proto::query::bls as q_bls;
use gonka_proto::query::settlement as q;
use gonka_proto::settlement as pb;

use crate::commit::{commit, HostEndpoint};
use crate::demands::{Backlog, ROUND};
use crate::escrow::{self, EscrowBook};
use crate::lock;
use crate::settle::{Outbox, Pending, StoredBatch};
use crate::TransferAgent;

/// How the committer builds batches.
#[derive(Debug, Clone, Copy)]
pub struct CommitPolicy {
    /// Records per batch (capped by the chain's `max_batch_records`).
    pub max_records: usize,
    /// Longest a record waits for its batch to fill.
    pub interval: Duration,
    /// Longest to wait for a batch's inclusion.
    pub inclusion_timeout: Duration,
    /// Limits of each co-signature request to an ML node.
    pub cosign_limits: Limits,
    /// FOR TESTS ONLY: abort the process right after storing batch `n`, before submitting
    /// it — a crash at the worst moment for a batch (`testing` feature).
    #[cfg(feature = "testing")]
    pub crash_after_batch: Option<u64>,
}

impl Default for CommitPolicy {
    fn default() -> Self {
        Self {
            max_records: 10_000,
            interval: Duration::from_secs(1),
            inclusion_timeout: Duration::from_secs(30),
            cosign_limits: Limits {
                connect: Duration::from_secs(2),
                first_byte: Duration::from_secs(20),
                idle: Duration::from_secs(10),
                total: Duration::from_secs(30),
                max_body: 4096,
            },
            #[cfg(feature = "testing")]
            crash_after_batch: None,
        }
    }
}

/// What the committer works with.
pub struct Committer {
    /// The chain, signing as the TA.
    chain: Arc<Chain>,
    /// The durable outbox.
    outbox: Arc<Outbox>,
    /// The requesters' escrows.
    escrows: Arc<EscrowBook>,
    /// The TA (its registry gives the nodes to ask for co-signatures).
    ta: Arc<TransferAgent>,
    /// How to build batches.
    policy: CommitPolicy,
    /// Open leaf demands on the TA's batches: no new batch while a full round of them waits.
    backlog: Arc<Backlog>,
    /// Hosts' BLS keys read from chain.
    bls_keys: Mutex<BTreeMap<String, PublicKey>>,
}

impl Committer {
    /// A committer signing on `chain` as the TA `ta`, from `outbox`, debiting `escrows`,
    /// building batches by `policy` and waiting on `backlog`.
    pub fn new(
        chain: Arc<Chain>,
        outbox: Arc<Outbox>,
        escrows: Arc<EscrowBook>,
        ta: Arc<TransferAgent>,
        policy: CommitPolicy,
        backlog: Arc<Backlog>,
    ) -> Committer {
        Committer {
            chain,
            outbox,
            escrows,
            ta,
            policy,
            backlog,
            bls_keys: Mutex::new(BTreeMap::new()),
        }
    }
}

/// What became of a submitted batch.
enum Fate {
    /// On chain, at this height (or a later one, when learned by query).
    Included(u64),
    /// Not on chain, and this copy never will be: `set_aside` names the records that must
    /// not come back.
    Refused {
        reason: String,
        set_aside: BTreeMap<String, String>,
    },
    /// Unknown yet (chain unreachable, or a copy still on its way): send it again later.
    Later(String),
}

impl Committer {
    /// Runs until the process ends.
    pub async fn run(self) {
        let mut delay = Duration::from_millis(500);
        let mut first = true;
        loop {
            match self.step(std::mem::take(&mut first)).await {
                Ok(true) => delay = Duration::from_millis(500),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), delay_ms = delay.as_millis() as u64, "cannot commit a batch now; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    /// One round: settles the unincluded batch, or builds and settles the next one. `Ok(true)`
    /// when a batch landed or went back; `Ok(false)` when there was nothing to do.
    async fn step(&self, first: bool) -> anyhow::Result<bool> {
        if let Some(stored) = self.outbox.unincluded()? {
            return self.settle(stored).await.map(|()| true);
        }
        if self.backlog.open() >= ROUND {
            tracing::debug!(open = self.backlog.open(), "leaf demands to answer first");
            tokio::time::sleep(Duration::from_millis(250)).await;
            return Ok(false);
        }
        let params = self.params().await?;
        let limit = self
            .policy
            .max_records
            .min(usize::try_from(params.max_batch_records).unwrap_or(usize::MAX))
            .max(1);
        if !first && self.outbox.len() < limit {
            let _ = tokio::time::timeout(self.policy.interval, async {
                while self.outbox.len() < limit {
                    self.outbox.added.notified().await;
                }
            })
            .await;
        }
        let pending = self.outbox.oldest(limit)?;
        if pending.is_empty() {
            return Ok(false);
        }
        let now = gonka_client::unix_now();
        let (stale, fresh): (Vec<&Pending>, Vec<&Pending>) = pending.iter().partition(|p| {
            p.served.record.timestamp.saturating_add(
                params
                    .max_record_age_secs
                    .saturating_sub(RECORD_AGE_MARGIN_SECS),
            ) < now
        });
        if !stale.is_empty() {
            tracing::error!(
                records = stale.len(),
                max_record_age_secs = params.max_record_age_secs,
                "records too old to settle; set aside"
            );
            let reason = format!(
                "older than the chain's max_record_age_secs ({}) less {RECORD_AGE_MARGIN_SECS} s when batched",
                params.max_record_age_secs
            );
            let aside: Vec<(&Pending, String)> =
                stale.into_iter().map(|p| (p, reason.clone())).collect();
            self.outbox.remove(&[], &aside)?;
        }
        let chosen = choose(
            &fresh,
            usize::try_from(params.max_batch_lines).unwrap_or(usize::MAX),
        );
        if chosen.is_empty() {
            return Ok(true);
        }
        let mut hosts = BTreeMap::new();
        for p in &chosen {
            let host = &p.served.host;
            if hosts.contains_key(host) {
                continue;
            }
            let node = self.ta.registered_node(&p.served.record.executor_node);
            if let (Some(node), Some(bls_key)) = (node, self.bls_key(host).await?) {
                let node_url = format!("http://{}", node.authority);
                hosts.insert(host.clone(), HostEndpoint { node_url, bls_key });
            }
        }
        let number = self.last_number().await? + 1;
        let served: Vec<Served> = chosen.iter().map(|p| p.served.clone()).collect();
        let Some(committed) = commit(
            self.chain.address(),
            self.chain.chain_id(),
            number,
            served,
            &hosts,
            self.policy.cosign_limits,
        )
        .await?
        else {
            anyhow::bail!("no host co-signed batch {number}; its records wait");
        };
        // A left-out host's key is read again next time (it may have been rotated).
        for host in committed.left_out.keys() {
            lock(&self.bls_keys).remove(host);
        }
        let in_batch: BTreeSet<&str> = committed
            .batch
            .leaves
            .iter()
            .filter_map(|l| l.record.as_ref().map(|r| r.inference_id.as_str()))
            .collect();
        let keys: Vec<u64> = chosen
            .iter()
            .filter(|p| in_batch.contains(p.served.record.inference_id.as_str()))
            .map(|p| p.key)
            .collect();
        let stored = StoredBatch {
            msg: Some(committed.msg),
            leaves: committed.batch.leaves,
        };
        self.outbox.commit(&keys, &stored)?;
        #[cfg(feature = "testing")]
        if self.policy.crash_after_batch == Some(number) {
            tracing::warn!(
                number,
                "TESTING: crashing after storing the batch, before submitting it"
            );
            std::process::abort();
        }
        tracing::info!(
            number,
            records = keys.len(),
            left_out = committed.left_out.len(),
            "batch committed; submitting"
        );
        self.settle(stored).await?;
        self.prune(params.challenge_window_blocks)?;
        Ok(true)
    }

    /// `host`'s BLS key as registered on chain (cached once read); `None` while it has none.
    async fn bls_key(&self, host: &str) -> anyhow::Result<Option<PublicKey>> {
        if let Some(key) = lock(&self.bls_keys).get(host) {
            return Ok(Some(*key));
        }
        let request = QueryKeyRequest {
            address: host.to_string(),
        };
        let key = match self.chain.client().query::<q_bls::Key>(&request).await {
            Ok(answer) => answer.key.and_then(|k| PublicKey::from_bytes(&k.pubkey)),
            Err(e) if e.downcast_ref::<QueryError>().is_some() => None,
            Err(e) => return Err(e),
        };
        match &key {
            Some(key) => {
                lock(&self.bls_keys).insert(host.to_string(), *key);
            }
            None => {
                tracing::warn!(%host, "host has no BLS key on chain; its records wait until it registers one")
            }
        }
        Ok(key)
    }

    /// The chain's settlement parameters.
    async fn params(&self) -> anyhow::Result<pb::Params> {
        self.chain
            .client()
            .query::<q::Params>(&pb::QueryParamsRequest {})
            .await?
            .params
            .context("the chain answered /settlement/params without parameters")
    }

    /// The TA's last batch number on chain, with its height.
    async fn chain_number(&self) -> anyhow::Result<(u64, u64)> {
        let request = pb::QueryBatchNumberRequest {
            transfer_agent: self.chain.address().to_string(),
        };
        let (height, answer) = self
            .chain
            .client()
            .query_with_height::<q::BatchNumber>(&request)
            .await?;
        Ok((answer.number, height))
    }

    /// The number the last batch took: the chain's or, if higher, the last one stored.
    async fn last_number(&self) -> anyhow::Result<u64> {
        Ok(self
            .chain_number()
            .await?
            .0
            .max(self.outbox.last_batch_number()?))
    }

    /// Submits `stored` and records its fate.
    async fn settle(&self, stored: StoredBatch) -> anyhow::Result<()> {
        let number = stored.number();
        match self.submit(&stored).await? {
            Fate::Included(height) => {
                self.escrows.included(height, &stored.debits());
                self.outbox.included(&stored, height)?;
                tracing::info!(
                    number,
                    height,
                    records = stored.leaves.len(),
                    "batch settled on chain"
                );
                Ok(())
            }
            Fate::Refused { reason, set_aside } => {
                tracing::warn!(number, %reason, set_aside = set_aside.len(), "the chain refused the batch; its records go back to pending");
                self.outbox.uncommit(&stored, &set_aside)?;
                anyhow::bail!("batch {number} refused: {reason}")
            }
            Fate::Later(why) => anyhow::bail!("batch {number} not settled yet: {why}"),
        }
    }

    async fn submit(&self, stored: &StoredBatch) -> anyhow::Result<Fate> {
        let number = stored.number();
        let msg = stored
            .msg
            .as_ref()
            .context("stored batch without its message")?;
        let outcome = self
            .chain
            .submit_for_outcome(vec![msg_settle_batch(msg)], self.policy.inclusion_timeout)
            .await;
        let reason = match outcome {
            Ok(TxOutcome::Executed(included)) => return Ok(Fate::Included(included.height)),
            Ok(TxOutcome::Refused(reason)) => reason,
            Err(e) => {
                // Unreachable or not included in time: it may still land.
                let (on_chain, height) = self.chain_number().await?;
                return Ok(if on_chain >= number {
                    Fate::Included(height)
                } else {
                    Fate::Later(format!("{e:#}"))
                });
            }
        };
        let (on_chain, height) = self.chain_number().await?;
        if on_chain >= number {
            // An earlier copy landed.
            return Ok(Fate::Included(height));
        }
        if reason.starts_with("settlement 7:") {
            return Ok(Fate::Later(format!(
                "an earlier copy is on its way ({reason})"
            )));
        }
        if reason.starts_with("settlement 16:") {
            return Ok(Fate::Later(format!(
                "the block is full of records ({reason})"
            )));
        }
        let set_aside = if reason.starts_with("settlement 10:") {
            self.uncovered(stored, &reason).await?
        } else {
            BTreeMap::new()
        };
        Ok(Fate::Refused { reason, set_aside })
    }

    /// The records of the requesters whose escrow, asked afresh, does not cover their line
    /// of `stored`, each with `reason`.
    async fn uncovered(
        &self,
        stored: &StoredBatch,
        reason: &str,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let mut short = BTreeSet::new();
        for (requester, amount) in stored.debits() {
            let terms = escrow::fetch(&self.chain, &self.escrows, &requester).await?;
            if terms.is_none_or(|t| t.balance < amount) {
                short.insert(requester);
            }
        }
        Ok(stored
            .leaves
            .iter()
            .filter_map(|leaf| leaf.record.as_ref())
            .filter(|r| short.contains(&r.requester))
            .map(|r| (r.inference_id.clone(), reason.to_string()))
            .collect())
    }

    /// Forgets the included batches more than two challenge windows older than the last one.
    fn prune(&self, window: u64) -> anyhow::Result<()> {
        let last = self.outbox.last_batch_number()?;
        let Some(height) = self.outbox.included_height(last)? else {
            return Ok(());
        };
        let pruned = self
            .outbox
            .prune_included_before(height.saturating_sub(window.saturating_mul(2)))?;
        if pruned > 0 {
            tracing::debug!(pruned, "old batches pruned");
        }
        Ok(())
    }
}

/// The records of `pending` (oldest first) that fit one batch: at most `max_lines`
/// requesters and hosts, and one node per host (the first met).
fn choose<'a>(pending: &[&'a Pending], max_lines: usize) -> Vec<&'a Pending> {
    let mut requesters = BTreeSet::new();
    let mut hosts: BTreeMap<&str, &str> = BTreeMap::new();
    let mut chosen = Vec::new();
    for &p in pending {
        let record = &p.served.record;
        let node = hosts.get(p.served.host.as_str());
        let new_host = node.is_none();
        if node.is_some_and(|n| *n != record.executor_node) {
            continue;
        }
        let new_requester = !requesters.contains(record.requester.as_str());
        if (new_host && hosts.len() >= max_lines)
            || (new_requester && requesters.len() >= max_lines)
        {
            continue;
        }
        hosts.insert(&p.served.host, &record.executor_node);
        requesters.insert(record.requester.as_str());
        chosen.push(p);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::inference::WorkRecord;

    fn pending(key: u64, requester: &str, host: &str, node: &str) -> Pending {
        Pending {
            key,
            served: Served {
                record: WorkRecord {
                    inference_id: format!("id{key}"),
                    requester: requester.into(),
                    executor_node: node.into(),
                    ..WorkRecord::default()
                },
                host: host.into(),
                cost: 1,
                work_per_token: 0,
            },
        }
    }

    #[test]
    fn a_batch_takes_one_node_per_host_and_at_most_max_lines_requesters_and_hosts() {
        let all = [
            pending(0, "r1", "h1", "n1"),
            pending(1, "r2", "h1", "n1b"),
            pending(2, "r2", "h2", "n2"),
            pending(3, "r3", "h1", "n1"),
            pending(4, "r1", "h3", "n3"),
            pending(5, "r1", "h2", "n2"),
        ];
        let refs: Vec<&Pending> = all.iter().collect();
        let keys = |chosen: Vec<&Pending>| chosen.iter().map(|p| p.key).collect::<Vec<_>>();
        // h1's second node waits; everything else fits 3 lines.
        assert_eq!(keys(choose(&refs, 3)), [0, 2, 3, 4, 5]);
        // Two lines: r3 and h3 would be third ones.
        assert_eq!(keys(choose(&refs, 2)), [0, 2, 5]);
    }
}
