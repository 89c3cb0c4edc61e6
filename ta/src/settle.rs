//! Settlement of served requests on chain.
//!
//! Every completed request becomes a signed [`WorkRecord`] that is made durable (by the
//! [`recorder`](crate::recorder): its journal, then the [`Outbox`], a redb database) *before*
//! the TA considers it done, so a crash or restart loses no record. The [`committer`](crate::committer) moves pending
//! records atomically into a stored committed batch, which stays (with its signed message,
//! to resubmit after a crash, and its leaves, to serve with proofs) until pruned after its
//! challenge window; records of a batch the chain refuses come back to pending, or are set
//! aside with the chain's reason.
//!
//! The outbox also tracks what each requester owes for records not yet on chain (pending, or
//! in a batch not yet included), so the TA's payment check counts money already promised.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use gonka_client::settlement::Served;
use gonka_proto::batch::parse_decimal;
use gonka_proto::settlement::{BatchLeaf, MsgSettleBatch};
use prost::Message;
use redb::{
    Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction,
};
use tokio::sync::Notify;

/// Pending records: sequence number → protobuf `BatchLeaf` holding the record, its executor's
/// host and the host's payout (`cost`); the chaining fields are filled when a batch is built.
const PENDING: TableDefinition<u64, &[u8]> = TableDefinition::new("pending");
/// Records the chain refused on their own: inference id → the chain's reason.
const REJECTED: TableDefinition<&str, &str> = TableDefinition::new("rejected");
/// Committed batches: number → protobuf [`StoredBatch`].
const BATCHES: TableDefinition<u64, &[u8]> = TableDefinition::new("batches");
/// Committed batches known to be on chain: number → height of the block that included it.
const INCLUDED: TableDefinition<u64, u64> = TableDefinition::new("included");
/// Where each committed record is: inference id → (batch number, leaf index). Written with
/// its batch, removed with it.
const LEAF_AT: TableDefinition<&str, (u64, u64)> = TableDefinition::new("leaf_at");

/// A pending record with its outbox key.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// Outbox key (arrival order).
    pub key: u64,
    /// The record with its executor's host and the host's payout.
    pub served: Served,
}

impl Pending {
    /// ngnk the requester is charged: the host's payout plus the commission.
    pub fn charge(&self) -> u128 {
        charge(&self.served)
    }
}

/// ngnk the requester of `served` is charged: the host's payout plus the signed commission.
pub fn charge(served: &Served) -> u128 {
    served
        .cost
        .saturating_add(parse_decimal(&served.record.commission).unwrap_or(0))
}

/// A committed batch as the transfer agent keeps it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StoredBatch {
    /// The message with the hosts' aggregate signature, as submitted.
    #[prost(message, optional, tag = "1")]
    pub msg: Option<MsgSettleBatch>,
    /// The leaves, in tree order.
    #[prost(message, repeated, tag = "2")]
    pub leaves: Vec<BatchLeaf>,
}

impl StoredBatch {
    /// The inference ids of its leaves, in tree order.
    pub fn inference_ids(&self) -> impl Iterator<Item = &str> {
        self.leaves
            .iter()
            .map(|leaf| leaf.record.as_ref().map_or("", |r| r.inference_id.as_str()))
    }

    /// Its number.
    pub fn number(&self) -> u64 {
        self.msg.as_ref().map_or(0, |m| m.number)
    }

    /// What it charges each requester.
    pub fn debits(&self) -> Vec<(String, u128)> {
        self.msg
            .iter()
            .flat_map(|m| &m.requesters)
            .map(|line| {
                (
                    line.requester.clone(),
                    parse_decimal(&line.amount).unwrap_or(0),
                )
            })
            .collect()
    }
}

/// The durable queue of records waiting to be settled, and the committed batches.
pub struct Outbox {
    db: Arc<Database>,
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

impl OutboxState {
    fn owe(&mut self, requester: &str, amount: u128) {
        *self.owed.entry(requester.to_string()).or_default() += amount;
    }

    fn settle(&mut self, requester: &str, amount: u128) {
        if let Some(owed) = self.owed.get_mut(requester) {
            *owed = owed.saturating_sub(amount);
            if *owed == 0 {
                self.owed.remove(requester);
            }
        }
    }
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("pending", &self.len())
            .finish_non_exhaustive()
    }
}

fn encode(served: &Served) -> Vec<u8> {
    served.to_leaf().encode_to_vec()
}

fn decode(key: u64, value: &[u8]) -> Result<Pending> {
    let leaf = BatchLeaf::decode(value).context("outbox entry is not a batch leaf")?;
    let served = Served::of_leaf(&leaf).context("outbox entry lacks its record or cost")?;
    Ok(Pending { key, served })
}

fn decode_batch(value: &[u8]) -> Result<StoredBatch> {
    StoredBatch::decode(value).context("stored batch is not a StoredBatch")
}

/// Drops the leaf locations of `batch`, which is going away.
fn forget_leaves(tx: &WriteTransaction, batch: &StoredBatch) -> Result<()> {
    let mut leaf_at = tx.open_table(LEAF_AT)?;
    for id in batch.inference_ids() {
        leaf_at.remove(id)?;
    }
    Ok(())
}

impl Outbox {
    /// Opens (or creates) the outbox at `path` and reloads what is pending.
    pub fn open(path: &Path) -> Result<Outbox> {
        let db = Database::create(path)
            .with_context(|| format!("opening the outbox {}", path.display()))?;
        Self::in_database(Arc::new(db))
    }

    /// The outbox in the tables of `db` (which may hold the payload store too), reloading
    /// what is pending.
    pub fn in_database(db: Arc<Database>) -> Result<Outbox> {
        let tx = db.begin_write()?;
        tx.open_table(PENDING)?;
        tx.open_table(REJECTED)?;
        tx.open_table(BATCHES)?;
        tx.open_table(INCLUDED)?;
        tx.open_table(LEAF_AT)?;
        tx.commit()?;
        let mut state = OutboxState::default();
        {
            let read = db.begin_read()?;
            for entry in read.open_table(PENDING)?.iter()? {
                let (key, value) = entry?;
                let pending = decode(key.value(), value.value())?;
                state.next_key = pending.key + 1;
                state.pending += 1;
                state.owe(&pending.served.record.requester, pending.charge());
            }
            let included = read.open_table(INCLUDED)?;
            for entry in read.open_table(BATCHES)?.iter()? {
                let (number, value) = entry?;
                if included.get(number.value())?.is_none() {
                    for (requester, amount) in decode_batch(value.value())?.debits() {
                        state.owe(&requester, amount);
                    }
                }
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

    /// Durably appends `served`.
    pub fn put(&self, served: &Served) -> Result<()> {
        self.put_many(&[served])
    }

    /// Durably appends every record of `served`, in one write.
    pub fn put_many(&self, served: &[&Served]) -> Result<()> {
        self.put_many_with(served, Durability::Immediate, |_| Ok(()))
    }

    /// [`Outbox::put_many`], with `first`'s writes (to other tables of the outbox's
    /// database) in the same transaction (both written, or neither), committed with
    /// `durability`. Nothing is owed if the write fails.
    pub fn put_many_with(
        &self,
        served: &[&Served],
        durability: Durability,
        first: impl FnOnce(&WriteTransaction) -> Result<()>,
    ) -> Result<()> {
        let first_key = self.take_keys(served.len());
        let keyed: Vec<(u64, &Served)> = (first_key..).zip(served.iter().copied()).collect();
        self.write_at(&keyed, durability, first)?;
        self.owe_for(served);
        Ok(())
    }

    /// Reserves the keys of `count` records about to be written; returns the first.
    pub fn take_keys(&self, count: usize) -> u64 {
        let mut state = self.state();
        let key = state.next_key;
        state.next_key += count as u64;
        key
    }

    /// Counts what the requesters of `served` owe for them (once per record, when it is
    /// durable: the recorder does before the records reach the outbox's tables, since its
    /// journal made them durable first).
    pub fn owe_for(&self, served: &[&Served]) {
        let mut state = self.state();
        for s in served {
            state.owe(&s.record.requester, charge(s));
        }
    }

    /// Writes each record at its key (from [`Outbox::take_keys`]), with `first`'s writes in
    /// the same transaction, committed with `durability`. The lock every request's payment
    /// check takes is never held across the commit.
    pub fn write_at(
        &self,
        records: &[(u64, &Served)],
        durability: Durability,
        first: impl FnOnce(&WriteTransaction) -> Result<()>,
    ) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(durability);
        first(&tx)?;
        {
            let mut pending = tx.open_table(PENDING)?;
            for (key, s) in records {
                pending.insert(*key, encode(s).as_slice())?;
            }
        }
        tx.commit().context("writing work records to the outbox")?;
        self.state().pending += records.len();
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
                refused.insert(p.served.record.inference_id.as_str(), reason.as_str())?;
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
            state.settle(&p.served.record.requester, p.charge());
        }
        Ok(())
    }

    /// Moves the pending records `keys` into the committed batch `batch`, in one write: from
    /// now on they are settled by that batch or, if the chain refuses it, put back by
    /// [`Outbox::uncommit`].
    pub fn commit(&self, keys: &[u64], batch: &StoredBatch) -> Result<()> {
        let mut state = self.state();
        let tx = self.db.begin_write()?;
        {
            let mut pending = tx.open_table(PENDING)?;
            for key in keys {
                pending.remove(*key)?;
            }
            tx.open_table(BATCHES)?
                .insert(batch.number(), batch.encode_to_vec().as_slice())?;
            let mut leaf_at = tx.open_table(LEAF_AT)?;
            for (index, id) in (0u64..).zip(batch.inference_ids()) {
                leaf_at.insert(id, (batch.number(), index))?;
            }
        }
        tx.commit().context("storing a committed batch")?;
        state.pending -= keys.len();
        Ok(())
    }

    /// The stored `batch` was included at `height`: its records are no longer owed.
    pub fn included(&self, batch: &StoredBatch, height: u64) -> Result<()> {
        let mut state = self.state();
        let number = batch.number();
        if self.included_height(number)?.is_some() {
            return Ok(());
        }
        let tx = self.db.begin_write()?;
        tx.open_table(INCLUDED)?.insert(number, height)?;
        tx.commit().context("marking a batch included")?;
        for (requester, amount) in batch.debits() {
            state.settle(&requester, amount);
        }
        Ok(())
    }

    /// Height at which batch `number` was included, once known.
    pub fn included_height(&self, number: u64) -> Result<Option<u64>> {
        let read = self.db.begin_read()?;
        Ok(read.open_table(INCLUDED)?.get(number)?.map(|h| h.value()))
    }

    /// The stored `batch`, which the chain refused, goes away: its records go back to
    /// pending, except those in `set_aside` (inference id → reason), which are kept aside as
    /// refused. Nothing happens if the batch is no longer stored.
    pub fn uncommit(
        &self,
        batch: &StoredBatch,
        set_aside: &BTreeMap<String, String>,
    ) -> Result<()> {
        let mut state = self.state();
        let mut back = Vec::new();
        let tx = self.db.begin_write()?;
        if tx.open_table(BATCHES)?.remove(batch.number())?.is_none() {
            return Ok(());
        }
        forget_leaves(&tx, batch)?;
        {
            let mut pending = tx.open_table(PENDING)?;
            let mut refused = tx.open_table(REJECTED)?;
            let mut key = state.next_key;
            for leaf in &batch.leaves {
                let served = Served::of_leaf(leaf).context("stored leaf lacks its record")?;
                match set_aside.get(&served.record.inference_id) {
                    Some(reason) => {
                        refused.insert(served.record.inference_id.as_str(), reason.as_str())?;
                    }
                    None => {
                        pending.insert(key, encode(&served).as_slice())?;
                        key += 1;
                    }
                }
                back.push(served);
            }
        }
        tx.commit()
            .context("putting a refused batch's records back")?;
        for served in back {
            if set_aside.contains_key(&served.record.inference_id) {
                state.settle(&served.record.requester, charge(&served));
            } else {
                state.next_key += 1;
                state.pending += 1;
            }
        }
        drop(state);
        self.added.notify_one();
        Ok(())
    }

    /// Committed batch `number`, if kept.
    pub fn batch(&self, number: u64) -> Result<Option<StoredBatch>> {
        let read = self.db.begin_read()?;
        let table = read.open_table(BATCHES)?;
        table
            .get(number)?
            .map(|v| decode_batch(v.value()))
            .transpose()
    }

    /// Where the committed record of `inference_id` is: (batch number, leaf index); `None`
    /// while it is pending, or once its batch is refused or pruned.
    pub fn leaf_at(&self, inference_id: &str) -> Result<Option<(u64, u64)>> {
        let read = self.db.begin_read()?;
        Ok(read
            .open_table(LEAF_AT)?
            .get(inference_id)?
            .map(|at| at.value()))
    }

    /// The number of the last committed batch kept (0 if none).
    pub fn last_batch_number(&self) -> Result<u64> {
        let read = self.db.begin_read()?;
        let table = read.open_table(BATCHES)?;
        let last = table.last()?.map_or(0, |(k, _)| k.value());
        Ok(last)
    }

    /// The first committed batch not known to be included, if any.
    pub fn unincluded(&self) -> Result<Option<StoredBatch>> {
        let read = self.db.begin_read()?;
        let included = read.open_table(INCLUDED)?;
        for entry in read.open_table(BATCHES)?.iter()? {
            let (number, value) = entry?;
            if included.get(number.value())?.is_none() {
                return Ok(Some(decode_batch(value.value())?));
            }
        }
        Ok(None)
    }

    /// Forgets the batches included below `height` (their challenge windows are over).
    pub fn prune_included_before(&self, height: u64) -> Result<usize> {
        let tx = self.db.begin_write()?;
        let removed = {
            let mut included = tx.open_table(INCLUDED)?;
            let mut batches = tx.open_table(BATCHES)?;
            let mut old = Vec::new();
            for entry in included.iter()? {
                let (number, at) = entry?;
                if at.value() < height {
                    old.push(number.value());
                }
            }
            for number in &old {
                included.remove(*number)?;
                if let Some(stored) = batches.remove(*number)? {
                    forget_leaves(&tx, &decode_batch(stored.value())?)?;
                }
            }
            old.len()
        };
        tx.commit().context("pruning old batches")?;
        Ok(removed)
    }

    /// The database holding the outbox.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// Records waiting to be put in a batch.
    pub fn len(&self) -> usize {
        self.state().pending
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// ngnk `requester` owes for records not yet on chain.
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

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::inference::WorkRecord;

    fn served(id: &str, requester: &str, cost: u128) -> Served {
        Served {
            record: WorkRecord {
                inference_id: id.into(),
                requester: requester.into(),
                commission: "1".into(),
                ..WorkRecord::default()
            },
            host: "host".into(),
            cost,
            work_per_token: 0,
        }
    }

    fn temp_outbox(label: &str) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("gonka-outbox-{label}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        path
    }

    #[test]
    fn outbox_survives_reopen_and_tracks_what_is_owed() {
        let dir = temp_outbox("records");
        {
            let outbox = Outbox::open(&dir).unwrap();
            outbox.put(&served("a", "alice", 9)).unwrap();
            outbox.put(&served("b", "bob", 4)).unwrap();
            outbox.put(&served("c", "alice", 6)).unwrap();
            assert_eq!(outbox.owed_by("alice"), 17, "payouts plus commissions");
        }
        let outbox = Outbox::open(&dir).unwrap();
        assert_eq!(outbox.len(), 3);
        assert_eq!(outbox.owed_by("alice"), 17);
        let oldest = outbox.oldest(2).unwrap();
        assert_eq!(
            oldest
                .iter()
                .map(|p| p.served.record.inference_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(oldest[0].served, served("a", "alice", 9));
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
        outbox.put(&served("d", "bob", 0)).unwrap();
        let rest = outbox.oldest(10).unwrap();
        assert_eq!(rest.len(), 2);
        assert!(
            rest[0].key < rest[1].key,
            "new keys follow the reloaded ones"
        );
        drop(outbox);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_record_whose_write_fails_is_neither_pending_nor_owed() {
        let path = temp_outbox("failed-write");
        let outbox = Outbox::open(&path).unwrap();
        let failed =
            outbox.put_many_with(&[&served("a", "alice", 9)], Durability::Immediate, |_| {
                anyhow::bail!("the disk is full")
            });
        assert!(failed.is_err());
        assert_eq!((outbox.len(), outbox.owed_by("alice")), (0, 0));
        drop(outbox);
        let outbox = Outbox::open(&path).unwrap();
        assert!(outbox.oldest(10).unwrap().is_empty(), "nothing was written");
        drop(outbox);
        std::fs::remove_file(&path).unwrap();
    }

    /// A stored batch of `pending` with one requester line per requester.
    fn stored(number: u64, pending: &[Pending]) -> StoredBatch {
        let mut lines: BTreeMap<String, u128> = BTreeMap::new();
        for p in pending {
            *lines.entry(p.served.record.requester.clone()).or_default() += p.charge();
        }
        StoredBatch {
            msg: Some(MsgSettleBatch {
                number,
                requesters: lines
                    .into_iter()
                    .map(
                        |(requester, amount)| gonka_proto::settlement::RequesterTotal {
                            requester,
                            amount: amount.to_string(),
                        },
                    )
                    .collect(),
                ..MsgSettleBatch::default()
            }),
            leaves: pending
                .iter()
                .map(|p| BatchLeaf::decode(encode(&p.served).as_slice()).unwrap())
                .collect(),
        }
    }

    #[test]
    fn a_committed_batch_stays_owed_until_included_and_a_refused_one_comes_back() {
        let path = temp_outbox("batches");
        let outbox = Outbox::open(&path).unwrap();
        for (id, requester) in [("a", "alice"), ("b", "bob"), ("c", "alice")] {
            outbox.put(&served(id, requester, 9)).unwrap();
        }
        let first = outbox.oldest(2).unwrap();
        let keys: Vec<u64> = first.iter().map(|p| p.key).collect();
        let batch1 = stored(1, &first);
        outbox.commit(&keys, &batch1).unwrap();
        assert_eq!((outbox.len(), outbox.owed_by("alice")), (1, 20));
        assert_eq!(
            outbox.leaf_at("b").unwrap(),
            Some((1, 1)),
            "leaf b is at 1/1"
        );
        assert_eq!(outbox.leaf_at("c").unwrap(), None, "c is still pending");
        assert_eq!(outbox.unincluded().unwrap().unwrap().number(), 1);
        // A crash now: the batch and what it owes survive.
        drop(outbox);
        let outbox = Outbox::open(&path).unwrap();
        assert_eq!(
            (outbox.len(), outbox.owed_by("alice"), outbox.owed_by("bob")),
            (1, 20, 10)
        );
        assert_eq!(outbox.last_batch_number().unwrap(), 1);
        outbox.included(&batch1, 40).unwrap();
        outbox.included(&batch1, 41).unwrap();
        assert_eq!(
            (outbox.owed_by("alice"), outbox.owed_by("bob")),
            (10, 0),
            "counted once"
        );
        assert!(outbox.unincluded().unwrap().is_none());
        assert_eq!(outbox.included_height(1).unwrap(), Some(40));

        // Batch 2 is refused; one record is set aside, the other goes back to pending.
        outbox.put(&served("d", "bob", 9)).unwrap();
        let second = outbox.oldest(10).unwrap();
        let keys: Vec<u64> = second.iter().map(|p| p.key).collect();
        let batch2 = stored(2, &second);
        outbox.commit(&keys, &batch2).unwrap();
        assert_eq!(outbox.len(), 0);
        let aside = BTreeMap::from([("d".to_string(), "escrow short".to_string())]);
        assert_eq!(outbox.leaf_at("d").unwrap(), Some((2, 1)));
        outbox.uncommit(&batch2, &aside).unwrap();
        assert_eq!(
            outbox.leaf_at("d").unwrap(),
            None,
            "a refused batch's leaves go"
        );
        assert_eq!(outbox.leaf_at("c").unwrap(), None);
        assert_eq!(
            (outbox.len(), outbox.owed_by("alice"), outbox.owed_by("bob")),
            (1, 10, 0)
        );
        assert_eq!(
            outbox.oldest(10).unwrap()[0].served.record.inference_id,
            "c"
        );
        assert!(outbox.batch(2).unwrap().is_none());
        assert_eq!(
            outbox.rejected().unwrap(),
            [("d".to_string(), "escrow short".to_string())]
        );
        // Batches included below a height are pruned; the rest stay.
        assert_eq!(outbox.prune_included_before(40).unwrap(), 0);
        assert_eq!(outbox.prune_included_before(41).unwrap(), 1);
        assert!(outbox.batch(1).unwrap().is_none());
        assert_eq!(
            outbox.leaf_at("a").unwrap(),
            None,
            "a pruned batch's leaves go"
        );
        drop(outbox);
        std::fs::remove_file(&path).unwrap();
    }
}
