//! Typed access to inference state; other crates use these traits, never the keys.

use gonka_proto::inference::{Model, Node, Params, StoredRecord, TransferAgent};
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{
    paginate, paginate_proto, Page, Result, StateRead, StateReadExt, StateWrite, StateWriteExt,
};

use crate::{default_params, keys};

/// A model's work units per ngnk as the fraction `(work_per_token, price_per_token)` (an
/// unparsable price counts as the highest).
fn work_price(model: &Model) -> (u128, u128) {
    let ngnk = gonka_sdk::parse_amount("price_per_token", &model.price_per_token);
    (
        u128::from(model.work_per_token.max(1)),
        ngnk.unwrap_or(u128::MAX),
    )
}

/// Whether `work` units for `payout` ngnk cost at least `model`'s ngnk per work unit: `work ×
/// price_per_token ≤ payout × work_per_token` (always, for a free model).
pub fn work_within(model: &Model, work: u64, payout: u128) -> bool {
    let (per_token, price) = work_price(model);
    u128::from(work).saturating_mul(price) <= payout.saturating_mul(per_token)
}

/// Whether `a`'s work costs fewer ngnk per unit than `b`'s.
fn cheaper_work(a: &Model, b: &Model) -> bool {
    let ((wa, pa), (wb, pb)) = (work_price(a), work_price(b));
    wa.saturating_mul(pb) > wb.saturating_mul(pa)
}

/// Reads of inference state.
pub trait InferenceRead: StateRead {
    /// Current parameters (the defaults if genesis stored none).
    fn inference_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// A priced model.
    fn model(&self, id: &str) -> Result<Option<Model>> {
        self.get_proto(&keys::model(id))
    }

    /// The model whose work costs the fewest ngnk per unit (the highest `work_per_token` per
    /// ngnk of `price_per_token`): what bounds the work a batch's host may claim for its
    /// payout. `None` before the first model.
    fn cheapest_work_model(&self) -> Result<Option<Model>> {
        match self.get_raw(&keys::cheapest_work_model())? {
            Some(id) => self.model(&String::from_utf8_lossy(&id)),
            None => Ok(None),
        }
    }

    /// Every model, ascending by id.
    fn models(&self) -> Result<Vec<Model>> {
        Ok(self
            .prefix_proto(&keys::models())?
            .into_iter()
            .map(|(_, m)| m)
            .collect())
    }

    /// A registered ML node.
    fn node(&self, id: &str) -> Result<Option<Node>> {
        self.get_proto(&keys::node(id))
    }

    /// The id of the node registered with public key `pubkey`, if any.
    fn node_with_key(&self, pubkey: &[u8]) -> Result<Option<String>> {
        Ok(self
            .get_raw(&keys::node_key(pubkey))?
            .map(|id| String::from_utf8_lossy(&id).into_owned()))
    }

    /// The nodes of `host`, ascending by id (read through the host index).
    fn nodes_of_host(&self, host: &str) -> Result<Vec<Node>> {
        let prefix = keys::nodes_of_host(host);
        let mut nodes = Vec::new();
        for (key, _) in self.prefix_raw(&prefix)? {
            let id = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            if let Some(node) = self.node(&id)? {
                nodes.push(node);
            }
        }
        Ok(nodes)
    }

    /// Every ML node, ascending by id.
    fn nodes(&self) -> Result<Vec<Node>> {
        Ok(self
            .prefix_proto(&keys::nodes())?
            .into_iter()
            .map(|(_, n)| n)
            .collect())
    }

    /// A registered transfer agent.
    fn transfer_agent(&self, address: &str) -> Result<Option<TransferAgent>> {
        self.get_proto(&keys::transfer_agent(address))
    }

    /// Every transfer agent, ascending by address.
    fn transfer_agents(&self) -> Result<Vec<TransferAgent>> {
        Ok(self
            .prefix_proto(&keys::transfer_agents())?
            .into_iter()
            .map(|(_, t)| t)
            .collect())
    }

    /// A stored work record.
    fn record(&self, inference_id: &str) -> Result<Option<StoredRecord>> {
        self.get_proto(&keys::record(inference_id))
    }

    /// Records stored in `epoch`, ascending by inference id.
    fn records_of_epoch(&self, epoch: u64) -> Result<Vec<StoredRecord>> {
        records_by_index(self, &keys::records_of_epoch(epoch))
    }

    /// One page of the models, by id.
    fn models_page(&self, page: Option<&PageRequest>) -> Result<Page<Model>> {
        paginate_proto(self, &keys::models(), page, |_, m| Ok(Some(m)))
    }

    /// One page of the ML nodes (of `host`, through the host index, or all when empty), by id.
    fn nodes_page(&self, host: &str, page: Option<&PageRequest>) -> Result<Page<Node>> {
        if host.is_empty() {
            return paginate_proto(self, &keys::nodes(), page, |_, n: Node| Ok(Some(n)));
        }
        // Through the host index: a page reads only that host's nodes.
        let index = keys::nodes_of_host(host);
        paginate(self, &index, page, |key, _| {
            self.node(&String::from_utf8_lossy(&key[index.len()..]))
        })
    }

    /// One page of the transfer agents, by address.
    fn transfer_agents_page(&self, page: Option<&PageRequest>) -> Result<Page<TransferAgent>> {
        paginate_proto(self, &keys::transfer_agents(), page, |_, t| Ok(Some(t)))
    }

    /// One page of the records stored in `epoch` (with `executor` set, of that node only),
    /// by inference id.
    fn records_page(
        &self,
        epoch: u64,
        executor: &str,
        page: Option<&PageRequest>,
    ) -> Result<Page<StoredRecord>> {
        let index = if executor.is_empty() {
            keys::records_of_epoch(epoch)
        } else {
            keys::records_of_executor(executor, epoch)
        };
        paginate(self, &index, page, |_, id| {
            self.record(&String::from_utf8_lossy(id))
        })
    }

    /// Whether records stored since the disputes sampler last drained them are waiting.
    fn has_new_records(&self) -> Result<bool> {
        let prefix = keys::new_records();
        Ok(!self.range_raw(&prefix, &prefix, 1)?.is_empty())
    }
}

impl<T: StateRead + ?Sized> InferenceRead for T {}

fn records_by_index<S: StateRead + ?Sized>(state: &S, prefix: &[u8]) -> Result<Vec<StoredRecord>> {
    let mut records = Vec::new();
    for (_, id) in state.prefix_raw(prefix)? {
        if let Some(record) = state.record(&String::from_utf8_lossy(&id))? {
            records.push(record);
        }
    }
    Ok(records)
}

/// Writes of inference state.
pub trait InferenceWrite: StateWrite {
    /// Replaces the parameters.
    fn put_inference_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores a model (and notes it if its work is the cheapest yet).
    fn put_model(&mut self, model: &Model) -> Result<()> {
        self.put_proto(keys::model(&model.id), model);
        let cheaper = match self.cheapest_work_model()? {
            Some(best) => cheaper_work(model, &best),
            None => true,
        };
        if cheaper {
            self.put_raw(keys::cheapest_work_model(), model.id.as_bytes().to_vec());
        }
        Ok(())
    }

    /// Stores an ML node and indexes it by key and by host.
    fn put_node(&mut self, node: &Node) {
        self.put_proto(keys::node(&node.id), node);
        self.put_raw(keys::node_key(&node.pubkey), node.id.as_bytes().to_vec());
        self.put_raw(keys::node_of_host(&node.host, &node.id), Vec::new());
    }

    /// Removes an ML node and its index entries.
    fn delete_node(&mut self, node: &Node) {
        self.delete_raw(keys::node(&node.id));
        self.delete_raw(keys::node_key(&node.pubkey));
        self.delete_raw(keys::node_of_host(&node.host, &node.id));
    }

    /// Removes a transfer agent.
    fn delete_transfer_agent(&mut self, address: &str) {
        self.delete_raw(keys::transfer_agent(address));
    }

    /// Stores a transfer agent.
    fn put_transfer_agent(&mut self, agent: &TransferAgent) {
        self.put_proto(keys::transfer_agent(&agent.address), agent);
    }

    /// Stores a work record, indexes it by epoch and by executor node, and queues it for
    /// sampling ([`InferenceWrite::take_new_records`]). `stored.record` must be set (every
    /// record this module builds carries it); a bare one is a bug.
    fn put_record(&mut self, stored: &StoredRecord) {
        let id = self.put_record_unsampled(stored);
        self.put_raw(keys::new_record(&id), Vec::new());
    }

    /// Stores and indexes a work record as [`InferenceWrite::put_record`] does, without
    /// queueing it for sampling (a record brought on chain to be disputed is judged by its
    /// dispute's committee); returns its inference id.
    fn put_record_unsampled(&mut self, stored: &StoredRecord) -> String {
        let record = stored
            .record
            .as_ref()
            .expect("stored records carry their record");
        let id = &record.inference_id;
        self.put_proto(keys::record(id), stored);
        self.put_raw(
            keys::record_in_epoch(stored.epoch, id),
            id.as_bytes().to_vec(),
        );
        self.put_raw(
            keys::record_of_executor(&record.executor_node, stored.epoch, id),
            id.as_bytes().to_vec(),
        );
        id.clone()
    }

    /// Removes and returns the ids of the records stored since the last call, in id order:
    /// the disputes sampler drains it once per block, so its work is proportional to the
    /// records of that block (or of the blocks it waited for a group signature).
    fn take_new_records(&mut self) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        for (key, _) in self.prefix_raw(&keys::new_records())? {
            ids.extend(keys::parse_new_record(&key));
            self.delete_raw(key);
        }
        Ok(ids)
    }
}

impl<T: StateWrite + ?Sized> InferenceWrite for T {}
