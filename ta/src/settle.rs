//! Settlement of served requests on chain.
//!
//! Every completed request becomes a signed [`WorkRecord`] that is written to the durable
//! [`Outbox`] (a redb file, one fsync'd write per record) *before* the TA considers it done, so
//! a crash or restart loses no record. The [`run_batcher`] task sends pending records in
//! `MsgSubmitWorkBatch` transactions — as soon as a batch is full, or after `interval` — and
//! removes them once the tx is included. The chain judges each record alone: a record it
//! refuses inside an included batch (its `inference_record` event says `outcome=refused` with
//! code and reason) is moved to the `rejected` table with the chain's reason. A batch the
//! chain refuses as a whole (e.g. a sequence race, or this TA no longer staked) is split:
//! records already on chain are dropped and the rest are sent one by one, so nothing is lost
//! and nothing is settled twice.
//!
//! The outbox also tracks what each requester owes for records not yet settled, so the TA's
//! payment check (402) counts money that is already promised.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use gonka_client::tx::msg_submit_work_batch;
use gonka_client::TxOutcome;
use gonka_proto::inference::WorkRecord;
use prost::Message;
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use tokio::sync::Notify;

use gonka_client::Chain;

/// Pending records: sequence number → cost (u128 big-endian, 16 bytes) ‖ protobuf record.
const PENDING: TableDefinition<u64, &[u8]> = TableDefinition::new("pending");
/// Records the chain refused on their own: inference id → the chain's reason.
const REJECTED: TableDefinition<&str, &str> = TableDefinition::new("rejected");

/// A pending record with its outbox key and what it costs its requester.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// Outbox key (arrival order).
    pub key: u64,
    /// ngnk the chain will charge the requester: tokens × price + commission.
    pub cost: u128,
    /// The record.
    pub record: WorkRecord,
}

/// The durable queue of records waiting to be settled.
pub struct Outbox {
    db: Database,
    state: Mutex<OutboxState>,
    /// Woken when a record is added.
    pub added: Notify,
}

#[derive(Default)]
struct OutboxState {
    next_key: u64,
    pending: usize,
    owed: BTreeMap<String, u128>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("pending", &self.len())
            .finish_non_exhaustive()
    }
}

fn encode(cost: u128, record: &WorkRecord) -> Vec<u8> {
    let mut value = cost.to_be_bytes().to_vec();
    value.extend_from_slice(&record.encode_to_vec());
    value
}

fn decode(key: u64, value: &[u8]) -> Result<Pending> {
    let (cost, record) = value
        .split_at_checked(16)
        .context("outbox entry shorter than its cost prefix")?;
    Ok(Pending {
        key,
        cost: u128::from_be_bytes(cost.try_into().expect("16 bytes")),
        record: WorkRecord::decode(record).context("outbox entry is not a work record")?,
    })
}

impl Outbox {
    /// Opens (or creates) the outbox at `path` and reloads what is pending.
    pub fn open(path: &Path) -> Result<Outbox> {
        let db = Database::create(path)
            .with_context(|| format!("opening the outbox {}", path.display()))?;
        let tx = db.begin_write()?;
        tx.open_table(PENDING)?;
        tx.open_table(REJECTED)?;
        tx.commit()?;
        let mut state = OutboxState::default();
        {
            let read = db.begin_read()?;
            let table = read.open_table(PENDING)?;
            for entry in table.iter()? {
                let (key, value) = entry?;
                let pending = decode(key.value(), value.value())?;
                state.next_key = pending.key + 1;
                state.pending += 1;
                *state.owed.entry(pending.record.requester).or_default() += pending.cost;
            }
        }
        Ok(Outbox {
            db,
            state: Mutex::new(state),
            added: Notify::new(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Durably appends `record`, which will cost its requester `cost` ngnk.
    pub fn put(&self, record: &WorkRecord, cost: u128) -> Result<()> {
        let mut state = self.state();
        let key = state.next_key;
        let tx = self.db.begin_write()?;
        tx.open_table(PENDING)?
            .insert(key, encode(cost, record).as_slice())?;
        tx.commit().context("writing a work record to the outbox")?;
        state.next_key += 1;
        state.pending += 1;
        *state.owed.entry(record.requester.clone()).or_default() += cost;
        drop(state);
        self.added.notify_one();
        Ok(())
    }

    /// Up to `limit` pending records, oldest first.
    pub fn oldest(&self, limit: usize) -> Result<Vec<Pending>> {
        let read = self.db.begin_read()?;
        let table = read.open_table(PENDING)?;
        let mut out = Vec::new();
        for entry in table.iter()?.take(limit) {
            let (key, value) = entry?;
            out.push(decode(key.value(), value.value())?);
        }
        Ok(out)
    }

    /// Removes settled records; `rejected` ones are kept aside with the chain's reason.
    pub fn remove(&self, settled: &[&Pending], rejected: &[(&Pending, String)]) -> Result<()> {
        let mut state = self.state();
        let tx = self.db.begin_write()?;
        {
            let mut pending = tx.open_table(PENDING)?;
            let mut refused = tx.open_table(REJECTED)?;
            for p in settled {
                pending.remove(p.key)?;
            }
            for (p, reason) in rejected {
                pending.remove(p.key)?;
                refused.insert(p.record.inference_id.as_str(), reason.as_str())?;
            }
        }
        tx.commit()
            .context("removing settled records from the outbox")?;
        for p in settled
            .iter()
            .copied()
            .chain(rejected.iter().map(|(p, _)| *p))
        {
            state.pending -= 1;
            if let Some(owed) = state.owed.get_mut(&p.record.requester) {
                *owed = owed.saturating_sub(p.cost);
                if *owed == 0 {
                    state.owed.remove(&p.record.requester);
                }
            }
        }
        Ok(())
    }

    /// Records waiting to be settled.
    pub fn len(&self) -> usize {
        self.state().pending
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// ngnk `requester` owes for records not yet settled.
    pub fn owed_by(&self, requester: &str) -> u128 {
        self.state().owed.get(requester).copied().unwrap_or(0)
    }

    /// Records the chain refused on their own: (inference id, reason).
    pub fn rejected(&self) -> Result<Vec<(String, String)>> {
        let read = self.db.begin_read()?;
        let table = read.open_table(REJECTED)?;
        let mut out = Vec::with_capacity(table.len()? as usize);
        for entry in table.iter()? {
            let (id, reason) = entry?;
            out.push((id.value().to_string(), reason.value().to_string()));
        }
        Ok(out)
    }
}

/// How the batcher sends records.
#[derive(Debug, Clone, Copy)]
pub struct BatchPolicy {
    /// Records per tx (capped by the chain's `max_records_per_batch`).
    pub max_records: usize,
    /// Longest a record waits for its batch to fill.
    pub interval: Duration,
    /// Longest to wait for a tx's inclusion.
    pub inclusion_timeout: Duration,
}

impl Default for BatchPolicy {
    fn default() -> Self {
        Self {
            max_records: 64,
            interval: Duration::from_secs(1),
            inclusion_timeout: Duration::from_secs(30),
        }
    }
}

/// What became of one submission.
enum Submitted {
    /// Included and executed: each record is settled, or was refused alone with the chain's
    /// reason (inference id → `codespace code: reason`, from its `inference_record` event).
    Settled(BTreeMap<String, String>),
    /// Refused as a whole with the chain's reason.
    Refused(String),
    /// The chain could not be reached or did not include the tx in time.
    Unreachable(String),
}

async fn submit(chain: &Chain, records: Vec<WorkRecord>, timeout: Duration) -> Submitted {
    let msg = msg_submit_work_batch(chain.address(), records);
    match chain.submit_for_outcome(vec![msg], timeout).await {
        Ok(TxOutcome::Executed(included)) => Submitted::Settled(refused_alone(&included)),
        Ok(TxOutcome::Refused(reason)) => Submitted::Refused(reason),
        Err(e) => Submitted::Unreachable(format!("{e:#}")),
    }
}

/// The records of an included batch that the chain refused alone, with its reasons.
fn refused_alone(included: &gonka_client::Included) -> BTreeMap<String, String> {
    included
        .events_of("inference_record")
        .filter_map(|attributes| {
            let get = |key: &str| {
                attributes
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or_default()
            };
            (get("outcome") == "refused").then(|| {
                (
                    get("id").to_string(),
                    format!("{} {}: {}", get("codespace"), get("code"), get("reason")),
                )
            })
        })
        .collect()
}

/// Sends the outbox's records to the chain until the process ends. `max_per_batch` gives
/// the chain's current `max_records_per_batch`.
pub async fn run_batcher(
    chain: Arc<Chain>,
    outbox: Arc<Outbox>,
    policy: BatchPolicy,
    max_per_batch: impl Fn() -> usize + Send + 'static,
) {
    let mut retry_delay = Duration::from_millis(500);
    // Records left by a previous run are sent at once, without waiting for a batch to fill.
    let mut first = true;
    loop {
        let limit = policy.max_records.min(max_per_batch()).max(1);
        if !std::mem::take(&mut first) && outbox.len() < limit {
            // Wait for the batch to fill, at most one interval.
            let _ = tokio::time::timeout(policy.interval, async {
                while outbox.len() < limit {
                    outbox.added.notified().await;
                }
            })
            .await;
        }
        let batch = match outbox.oldest(limit) {
            Ok(b) if b.is_empty() => continue,
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the outbox");
                tokio::time::sleep(retry_delay).await;
                continue;
            }
        };
        let records = batch.iter().map(|p| p.record.clone()).collect();
        let outcome = submit(&chain, records, policy.inclusion_timeout).await;
        let done = match outcome {
            Submitted::Settled(refused) => {
                tracing::info!(
                    records = batch.len(),
                    refused = refused.len(),
                    "work batch settled on chain"
                );
                let (rejected, settled): (Vec<&Pending>, Vec<&Pending>) = batch
                    .iter()
                    .partition(|p| refused.contains_key(&p.record.inference_id));
                let rejected: Vec<(&Pending, String)> = rejected
                    .into_iter()
                    .map(|p| {
                        let reason = refused[&p.record.inference_id].clone();
                        tracing::error!(inference = %p.record.inference_id, %reason, "the chain refused this work record; set aside");
                        (p, reason)
                    })
                    .collect();
                outbox.remove(&settled, &rejected)
            }
            Submitted::Refused(reason) => {
                tracing::warn!(records = batch.len(), %reason, "work batch refused; settling its records one by one");
                settle_one_by_one(&chain, &outbox, &batch, policy.inclusion_timeout).await
            }
            Submitted::Unreachable(error) => {
                tracing::warn!(%error, delay_ms = retry_delay.as_millis() as u64, "cannot settle work records now; retrying");
                tokio::time::sleep(retry_delay).await;
                retry_delay = (retry_delay * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        retry_delay = Duration::from_millis(500);
        if let Err(e) = done {
            tracing::error!(error = %e, "cannot update the outbox");
            tokio::time::sleep(retry_delay).await;
        }
    }
}

/// Isolates the records of a refused batch: drops those already on chain, sends the others
/// alone, and sets aside those the chain refuses alone.
async fn settle_one_by_one(
    chain: &Chain,
    outbox: &Outbox,
    batch: &[Pending],
    timeout: Duration,
) -> Result<()> {
    let mut settled = Vec::new();
    let mut rejected = Vec::new();
    for p in batch {
        if chain.record_exists(&p.record.inference_id).await? {
            settled.push(p);
            continue;
        }
        match submit(chain, vec![p.record.clone()], timeout).await {
            Submitted::Settled(refused) => match refused.into_values().next() {
                Some(reason) => {
                    tracing::error!(inference = %p.record.inference_id, %reason, "the chain refuses this work record; set aside");
                    rejected.push((p, reason));
                }
                None => settled.push(p),
            },
            Submitted::Refused(reason) => {
                tracing::error!(inference = %p.record.inference_id, %reason, "the chain refuses this work record; set aside");
                rejected.push((p, reason));
            }
            Submitted::Unreachable(error) => {
                tracing::warn!(inference = %p.record.inference_id, %error, "chain unreachable; will retry");
                break;
            }
        }
    }
    outbox.remove(&settled, &rejected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_refused_inside_an_included_batch_are_read_from_its_events() {
        let attrs = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let included = gonka_client::Included {
            hash: "AB".into(),
            height: 7,
            code: 0,
            codespace: String::new(),
            log: String::new(),
            gas_wanted: 0,
            gas_used: 0,
            events: vec![
                (
                    "inference_record".into(),
                    attrs(&[("id", "a"), ("outcome", "stored")]),
                ),
                (
                    "transfer".into(),
                    attrs(&[("id", "x"), ("outcome", "refused")]),
                ),
                (
                    "inference_record".into(),
                    attrs(&[
                        ("id", "b"),
                        ("outcome", "refused"),
                        ("codespace", "inference"),
                        ("code", "23"),
                        ("reason", "signed for another transfer agent"),
                    ]),
                ),
            ],
        };
        let refused = refused_alone(&included);
        assert_eq!(refused.len(), 1);
        assert_eq!(
            refused["b"],
            "inference 23: signed for another transfer agent"
        );
    }

    fn record(id: &str, requester: &str) -> WorkRecord {
        WorkRecord {
            inference_id: id.into(),
            requester: requester.into(),
            ..WorkRecord::default()
        }
    }

    #[test]
    fn outbox_survives_reopen_and_tracks_what_is_owed() {
        let dir = std::env::temp_dir().join(format!("gonka-outbox-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        {
            let outbox = Outbox::open(&dir).unwrap();
            outbox.put(&record("a", "alice"), 10).unwrap();
            outbox.put(&record("b", "bob"), 5).unwrap();
            outbox.put(&record("c", "alice"), 7).unwrap();
            assert_eq!(outbox.owed_by("alice"), 17);
        }
        let outbox = Outbox::open(&dir).unwrap();
        assert_eq!(outbox.len(), 3);
        assert_eq!(outbox.owed_by("alice"), 17);
        let oldest = outbox.oldest(2).unwrap();
        assert_eq!(
            oldest
                .iter()
                .map(|p| p.record.inference_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        outbox
            .remove(&[&oldest[0]], &[(&oldest[1], "bad".to_string())])
            .unwrap();
        assert_eq!(
            (outbox.len(), outbox.owed_by("alice"), outbox.owed_by("bob")),
            (1, 7, 0)
        );
        assert_eq!(
            outbox.rejected().unwrap(),
            [("b".to_string(), "bad".to_string())]
        );
        outbox.put(&record("d", "bob"), 1).unwrap();
        let rest = outbox.oldest(10).unwrap();
        assert_eq!(rest.len(), 2);
        assert!(
            rest[0].key < rest[1].key,
            "new keys follow the reloaded ones"
        );
        drop(outbox);
        std::fs::remove_file(&dir).unwrap();
    }
}
