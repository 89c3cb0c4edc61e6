//! Typed access to settlement state; other crates use these traits, never the keys.

use gonka_auth::module_address;
use gonka_proto::settlement::{Batch, Escrow, LeafDemand, Params};
use gonka_sdk::{parse_amount, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::ledger::settled;
use crate::{default_params, keys, POOL};

/// Address of the module account holding escrowed money and the debits of pending batches.
pub fn pool_address() -> String {
    module_address(POOL)
}

/// An escrow's balance as a number.
pub fn escrow_balance(escrow: &Escrow) -> Result<u128> {
    parse_amount("escrow balance", &escrow.balance)
}

fn read_u64<S: StateRead + ?Sized>(state: &S, key: &[u8]) -> Result<u64> {
    Ok(state
        .get_raw(key)?
        .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
        .map_or(0, u64::from_be_bytes))
}

/// Before batch `id` is pruned: its demands still open (only a voided batch's can be; a
/// batch becomes final after all of its demands expired) leave its transfer agent's index,
/// since without the batch nobody can answer them. They stay stored, to return their
/// deposits when they expire. The batch also leaves the index by number.
fn drop_batch_indexes<S: StateWrite + ?Sized>(state: &mut S, id: u64) -> Result<()> {
    let Some(batch) = state.batch(id)? else {
        return Ok(());
    };
    let settled = settled(&batch);
    let agent = &settled.transfer_agent;
    for (_, demand) in state.prefix_proto::<LeafDemand>(&keys::batch_demands(id))? {
        state.delete_raw(keys::demand_by_agent(agent, id, demand.index));
    }
    state.delete_raw(keys::batch_by_number(agent, settled.number));
    Ok(())
}

/// Reads of settlement state.
pub trait SettlementRead: StateRead {
    /// Current parameters (the defaults if genesis stored none).
    fn settlement_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// The escrow of `requester` for `transfer_agent`.
    fn escrow(&self, requester: &str, transfer_agent: &str) -> Result<Option<Escrow>> {
        self.get_proto(&keys::escrow(requester, transfer_agent))
    }

    /// Every escrow, by requester then transfer agent (genesis export).
    fn escrows(&self) -> Result<Vec<Escrow>> {
        Ok(self
            .prefix_proto(&keys::escrows())?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// A batch, by id.
    fn batch(&self, id: u64) -> Result<Option<Batch>> {
        self.get_proto(&keys::batch(id))
    }

    /// The stored batch numbered `number` by `transfer_agent`.
    fn batch_by_number(&self, transfer_agent: &str, number: u64) -> Result<Option<Batch>> {
        match read_u64(self, &keys::batch_by_number(transfer_agent, number))? {
            0 => Ok(None),
            id => self.batch(id),
        }
    }

    /// The pending batches queued to become final at `height`, in id order.
    fn batches_final_at(&self, height: u64) -> Result<Vec<Batch>> {
        let prefix = keys::finals_at(height);
        let mut batches = Vec::new();
        for (key, _) in self.prefix_raw(&prefix)? {
            if let Some(batch) = keys::parse_batch_id(&prefix, &key).map(|id| self.batch(id)) {
                batches.extend(batch?);
            }
        }
        Ok(batches)
    }

    /// Whether batch `id` still waits for its leaf sampling.
    fn is_unsampled(&self, id: u64) -> Result<bool> {
        Ok(self.get_raw(&keys::unsampled_batch(id))?.is_some())
    }

    /// The ids of the first `limit` batches waiting for their leaf sampling, in id order.
    fn unsampled_batches(&self, limit: usize) -> Result<Vec<u64>> {
        let prefix = keys::unsampled();
        Ok(self
            .range_raw(&prefix, &prefix, limit)?
            .into_iter()
            .filter_map(|(key, _)| keys::parse_batch_id(&prefix, &key))
            .collect())
    }

    /// Every stored batch, by id (genesis export).
    fn batches(&self) -> Result<Vec<Batch>> {
        Ok(self
            .prefix_proto(&keys::batches())?
            .into_iter()
            .map(|(_, b)| b)
            .collect())
    }

    /// The last batch number of `transfer_agent` (0 before its first).
    fn batch_number(&self, transfer_agent: &str) -> Result<u64> {
        read_u64(self, &keys::batch_number(transfer_agent))
    }

    /// Every transfer agent's last batch number, by transfer agent (genesis export).
    fn batch_numbers(&self) -> Result<Vec<(String, u64)>> {
        let prefix = keys::batch_numbers();
        let mut numbers = Vec::new();
        for (key, value) in self.prefix_raw(&prefix)? {
            let agent = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            let number = <[u8; 8]>::try_from(value.as_slice()).map_or(0, u64::from_be_bytes);
            numbers.push((agent, number));
        }
        Ok(numbers)
    }

    /// The open demand of leaf `index` of batch `batch`.
    fn leaf_demand(&self, batch: u64, index: u64) -> Result<Option<LeafDemand>> {
        self.get_proto(&keys::demand(batch, index))
    }

    /// Every open demand, by batch and index (genesis export).
    fn leaf_demands(&self) -> Result<Vec<LeafDemand>> {
        Ok(self
            .prefix_proto(&keys::demands())?
            .into_iter()
            .map(|(_, d)| d)
            .collect())
    }

    /// The first `limit` open demands at or after `start` (batch, index) on the stored
    /// batches of `transfer_agent` (pending or voided: it can still answer them), by batch
    /// then index. Reads `limit` index entries
    /// and one demand each, however many are open.
    fn agent_demands(
        &self,
        transfer_agent: &str,
        start: (u64, u64),
        limit: usize,
    ) -> Result<Vec<LeafDemand>> {
        let prefix = keys::demands_by_agent(transfer_agent);
        let from = keys::demand_by_agent(transfer_agent, start.0, start.1);
        let mut demands = Vec::new();
        for (key, _) in self.range_raw(&prefix, &from, limit)? {
            if let Some((batch, index)) = keys::parse_demand_by_agent(&prefix, &key) {
                demands.extend(self.leaf_demand(batch, index)?);
            }
        }
        Ok(demands)
    }

    /// The id the next batch gets (ids start at 1).
    fn next_batch_id(&self) -> Result<u64> {
        Ok(read_u64(self, &keys::next_batch_id())?.max(1))
    }

    /// The records committed by the batches settled so far at `height`.
    fn block_records(&self, height: u64) -> Result<u64> {
        let stored = self.get_raw(&keys::block_records())?;
        Ok(match stored.as_deref().map(<[u8; 16]>::try_from) {
            Some(Ok(bytes)) if bytes[..8] == height.to_be_bytes() => {
                u64::from_be_bytes(bytes[8..].try_into().expect("8 bytes"))
            }
            _ => 0,
        })
    }
}

impl<T: StateRead + ?Sized> SettlementRead for T {}

/// Writes of settlement state.
pub trait SettlementWrite: StateWrite {
    /// Replaces the parameters.
    fn put_settlement_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores an escrow; when its release height is new (`previous_release` is `None` for a
    /// new escrow, else the height it was queued at) moves its release queue entry, so a
    /// balance change writes the escrow alone.
    fn put_escrow(&mut self, escrow: &Escrow, previous_release: Option<u64>) {
        let (requester, agent) = (&escrow.requester, &escrow.transfer_agent);
        if previous_release != Some(escrow.release_at) {
            if let Some(previous) = previous_release {
                self.delete_raw(keys::release(previous, requester, agent));
            }
            self.put_raw(
                keys::release(escrow.release_at, requester, agent),
                Vec::new(),
            );
        }
        self.put_proto(keys::escrow(requester, agent), escrow);
    }

    /// Removes an escrow and its release entry.
    fn delete_escrow(&mut self, escrow: &Escrow) {
        let (requester, agent) = (&escrow.requester, &escrow.transfer_agent);
        self.delete_raw(keys::release(escrow.release_at, requester, agent));
        self.delete_raw(keys::escrow(requester, agent));
    }

    /// Removes and returns the (requester, transfer agent) of the escrows released at
    /// `height`: work proportional to them.
    fn take_releases(&mut self, height: u64) -> Result<Vec<(String, String)>> {
        let prefix = keys::releases_at(height);
        let mut due = Vec::new();
        for (key, _) in self.prefix_raw(&prefix)? {
            due.extend(keys::parse_release(&prefix, &key));
            self.delete_raw(key);
        }
        Ok(due)
    }

    /// Stores a batch; a pending one is queued to become final at `batch.final_at`, any other
    /// leaves that queue.
    fn put_batch(&mut self, batch: &Batch) {
        let queued = keys::final_at(batch.final_at, batch.id);
        if batch.status == gonka_proto::settlement::BatchStatus::Pending as i32 {
            self.put_raw(queued, Vec::new());
        } else {
            self.delete_raw(queued);
        }
        self.put_proto(keys::batch(batch.id), batch);
    }

    /// Indexes a newly stored batch by its transfer agent and number
    /// ([`SettlementRead::batch_by_number`]); pruning removes the entry.
    fn index_batch_number(&mut self, batch: &Batch) {
        let settled = settled(batch);
        self.put_raw(
            keys::batch_by_number(&settled.transfer_agent, settled.number),
            batch.id.to_be_bytes().to_vec(),
        );
    }

    /// Queues batch `id` for its leaf sampling (`false`: takes it off the queue).
    fn set_unsampled(&mut self, id: u64, waiting: bool) {
        if waiting {
            self.put_raw(keys::unsampled_batch(id), Vec::new());
        } else {
            self.delete_raw(keys::unsampled_batch(id));
        }
    }

    /// Moves pending `batch`'s finality (and its place in the queue) to `final_at`.
    fn move_final(&mut self, batch: &mut Batch, final_at: u64) {
        self.delete_raw(keys::final_at(batch.final_at, batch.id));
        batch.final_at = final_at;
        self.put_batch(batch);
    }

    /// Removes and returns the ids of the batches that become final at `height`.
    fn take_finals(&mut self, height: u64) -> Result<Vec<u64>> {
        let prefix = keys::finals_at(height);
        let mut due = Vec::new();
        for (key, _) in self.prefix_raw(&prefix)? {
            due.extend(keys::parse_batch_id(&prefix, &key));
            self.delete_raw(key);
        }
        Ok(due)
    }

    /// Stores an open demand, queued to expire the block after its deadline and indexed
    /// under `transfer_agent`, its batch's ([`keys::demand_by_agent`]). `None` only for a
    /// demand whose batch is no longer stored (a voided batch genesis does not carry): nobody
    /// can answer it, it only waits to return its deposit, so it is not indexed. The caller
    /// passes the agent because it already holds the batch: reading it again here would
    /// charge the whole batch's bytes to the transaction a second time.
    fn put_leaf_demand(&mut self, demand: &LeafDemand, transfer_agent: Option<&str>) {
        let (batch, index) = (demand.batch_id, demand.index);
        self.put_raw(
            keys::demand_due(demand.deadline + 1, batch, index),
            Vec::new(),
        );
        if let Some(agent) = transfer_agent {
            self.put_raw(keys::demand_by_agent(agent, batch, index), Vec::new());
        }
        self.put_proto(keys::demand(batch, index), demand);
    }

    /// Removes a demand, its queue entry and its index entry under `transfer_agent`, its
    /// batch's (`None`: its batch is no longer stored, and the index entry left with it,
    /// see [`SettlementWrite::prune_batches`]).
    fn delete_leaf_demand(&mut self, demand: &LeafDemand, transfer_agent: Option<&str>) {
        let (batch, index) = (demand.batch_id, demand.index);
        self.delete_raw(keys::demand_due(demand.deadline + 1, batch, index));
        if let Some(agent) = transfer_agent {
            self.delete_raw(keys::demand_by_agent(agent, batch, index));
        }
        self.delete_raw(keys::demand(batch, index));
    }

    /// Removes and returns the demands that expire at `height` (their deadline passed
    /// unanswered), with their index entries.
    fn take_expired_demands(&mut self, height: u64) -> Result<Vec<LeafDemand>> {
        let prefix = keys::demands_due(height);
        let mut due = Vec::new();
        for (key, _) in self.prefix_raw(&prefix)? {
            let demand = match keys::parse_demand_due(&prefix, &key) {
                Some((batch, index)) => self.leaf_demand(batch, index)?,
                None => None,
            };
            let Some(demand) = demand else {
                self.delete_raw(key);
                continue;
            };
            let agent = self
                .batch(demand.batch_id)?
                .map(|batch| settled(&batch).transfer_agent.clone());
            // Its queue entry is `key`: the demand's deadline + 1 is `height`.
            self.delete_leaf_demand(&demand, agent.as_deref());
            due.push(demand);
        }
        Ok(due)
    }

    /// Queues batch `id` to be pruned from unix time `time` on.
    fn queue_batch_expiry(&mut self, time: u64, id: u64) {
        self.put_raw(keys::expiry(time, id), Vec::new());
    }

    /// Removes up to `limit` batches whose expiry is at or before unix time `now`, oldest
    /// first, with the index entries of their open demands; returns how many.
    fn prune_batches(&mut self, now: u64, limit: usize) -> Result<usize> {
        let prefix = keys::expiries();
        let mut pruned = 0;
        for (key, _) in self.range_raw(&prefix, &prefix, limit)? {
            let Some((time, id)) = keys::parse_expiry(&key) else {
                continue;
            };
            if time > now {
                break;
            }
            self.delete_raw(key);
            drop_batch_indexes(self, id)?;
            self.delete_raw(keys::batch(id));
            pruned += 1;
        }
        Ok(pruned)
    }

    /// Records `number` as `transfer_agent`'s last batch number.
    fn put_batch_number(&mut self, transfer_agent: &str, number: u64) {
        self.put_raw(
            keys::batch_number(transfer_agent),
            number.to_be_bytes().to_vec(),
        );
    }

    /// Sets the id the next batch gets.
    fn put_next_batch_id(&mut self, id: u64) {
        self.put_raw(keys::next_batch_id(), id.to_be_bytes().to_vec());
    }

    /// Records that the batches settled at `height` commit to `records` records.
    fn put_block_records(&mut self, height: u64, records: u64) {
        let mut value = height.to_be_bytes().to_vec();
        value.extend_from_slice(&records.to_be_bytes());
        self.put_raw(keys::block_records(), value);
    }
}

impl<T: StateWrite + ?Sized> SettlementWrite for T {}
