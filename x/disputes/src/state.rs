//! Typed access to disputes state; other crates use these traits, never the keys.

use gonka_auth::module_address;
use gonka_proto::disputes::{
    Dispute, ExecutorStats, OutputReveal, Params, Reputation, RevealDue, Validation,
};
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{
    paginate, paginate_proto, Page, Pager, Result, StateRead, StateReadExt, StateWrite,
    StateWriteExt,
};

use crate::{default_params, keys, status, ESCROW};
use gonka_sdk::PPM;

/// Address of the module account holding user deposits and slashed stake until a dispute
/// is settled (it is empty whenever no dispute is being settled or open with a deposit).
pub fn escrow_address() -> String {
    module_address(ESCROW)
}

/// Reads of disputes state.
pub trait DisputesRead: StateRead {
    /// Current parameters (the defaults if genesis stored none).
    fn disputes_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// The validation of a sampled record.
    fn validation(&self, inference_id: &str) -> Result<Option<Validation>> {
        self.get_proto(&keys::validation(inference_id))
    }

    /// The revealed output opening of a record, once revealed.
    fn output_reveal(&self, inference_id: &str) -> Result<Option<OutputReveal>> {
        self.get_proto(&keys::reveal(inference_id))
    }

    /// The reveal `transfer_agent` owes for record `inference_id`, if the chain waits for it.
    fn reveal_due(&self, transfer_agent: &str, inference_id: &str) -> Result<Option<RevealDue>> {
        self.get_proto(&keys::reveal_due(transfer_agent, inference_id))
    }

    /// One page of the reveals `transfer_agent` owes, ascending by inference id.
    fn reveals_due_page(
        &self,
        transfer_agent: &str,
        page: Option<&PageRequest>,
    ) -> Result<Page<RevealDue>> {
        paginate_proto(self, &keys::reveals_due_of(transfer_agent), page, |_, r| {
            Ok(Some(r))
        })
    }

    /// A dispute by id.
    fn dispute(&self, id: u64) -> Result<Option<Dispute>> {
        self.get_proto(&keys::dispute(id))
    }

    /// One page of the disputes with `status` (every dispute when empty), ascending by id.
    fn disputes_page(&self, status: &str, page: Option<&PageRequest>) -> Result<Page<Dispute>> {
        if status.is_empty() {
            paginate_proto(self, &keys::disputes(), page, |_, d| Ok(Some(d)))
        } else {
            let index = keys::disputes_with_status(status);
            paginate(self, &index, page, |key, _| {
                self.indexed_dispute(&index, key)
            })
        }
    }

    /// One page of the disputes `address` takes part in, ascending by id.
    fn disputes_of_page(&self, address: &str, page: Option<&PageRequest>) -> Result<Page<Dispute>> {
        let index = keys::disputes_of(address);
        paginate(self, &index, page, |key, _| {
            self.indexed_dispute(&index, key)
        })
    }

    /// Spends `pager` on the validations `validator` owes from the key suffix `start`,
    /// ascending by inference id, each turned into at most one item by `item`; returns where
    /// the list goes on (see [`Pager::scan`]).
    fn scan_pending_validations<T: prost::Message>(
        &self,
        validator: &str,
        pager: &mut Pager,
        start: &[u8],
        out: &mut Vec<T>,
        mut item: impl FnMut(Validation) -> Option<T>,
    ) -> Result<Option<Vec<u8>>> {
        pager.scan(self, &keys::pending_of(validator), start, out, |_, id| {
            Ok(self
                .validation(&String::from_utf8_lossy(id))?
                .and_then(&mut item))
        })
    }

    /// Spends `pager` on the disputes `address` takes part in from the key suffix `start`,
    /// ascending by id, each turned into at most one item by `item`.
    fn scan_disputes_of<T: prost::Message>(
        &self,
        address: &str,
        pager: &mut Pager,
        start: &[u8],
        out: &mut Vec<T>,
        mut item: impl FnMut(Dispute) -> Option<T>,
    ) -> Result<Option<Vec<u8>>> {
        let index = keys::disputes_of(address);
        pager.scan(self, &index, start, out, |key, _| {
            Ok(self.indexed_dispute(&index, key)?.and_then(&mut item))
        })
    }

    /// The dispute an index entry `key` under `index` names by its id suffix.
    fn indexed_dispute(&self, index: &[u8], key: &[u8]) -> Result<Option<Dispute>> {
        let id = key
            .strip_prefix(index)
            .and_then(|id| std::str::from_utf8(id).ok())
            .and_then(|s| s.parse().ok());
        Ok(id.map(|id| self.dispute(id)).transpose()?.flatten())
    }

    /// The id of the dispute on record `inference_id`, if any.
    fn record_dispute(&self, inference_id: &str) -> Result<Option<u64>> {
        self.get_proto(&keys::record_dispute(inference_id))
    }

    /// Sampling statistics of executor host `host` (zeros for a new executor).
    fn executor_stats(&self, host: &str) -> Result<ExecutorStats> {
        Ok(self
            .get_proto(&keys::executor_stats(host))?
            .unwrap_or_else(|| ExecutorStats {
                host: host.into(),
                ..Default::default()
            }))
    }

    /// Reputation of `validator` (full for one never assigned).
    fn reputation(&self, validator: &str) -> Result<Reputation> {
        Ok(self
            .get_proto(&keys::reputation(validator))?
            .unwrap_or_else(|| Reputation {
                validator: validator.into(),
                score_ppm: PPM,
                ..Default::default()
            }))
    }
}

impl<T: StateRead + ?Sized> DisputesRead for T {}

/// Writes of disputes state.
pub trait DisputesWrite: StateWrite {
    /// Replaces the parameters.
    fn put_disputes_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores a validation and keeps the pending and deadline indexes in step with its
    /// status: a pending validation is due by its `deadline_height`, a committed one (waiting
    /// for the reveal) by its `reveal_deadline_height`.
    fn put_validation(&mut self, v: &Validation) {
        self.put_proto(keys::validation(&v.inference_id), v);
        let id = v.inference_id.as_bytes().to_vec();
        let pending = keys::pending(&v.validator, &v.inference_id);
        let deadline = keys::validation_deadline(v.deadline_height, &v.inference_id);
        let reveal_deadline = keys::validation_deadline(v.reveal_deadline_height, &v.inference_id);
        self.delete_raw(pending.clone());
        self.delete_raw(deadline.clone());
        self.delete_raw(reveal_deadline.clone());
        if v.status == status::PENDING {
            self.put_raw(pending, id.clone());
            self.put_raw(deadline, id);
        } else if v.status == status::COMMITTED {
            self.put_raw(reveal_deadline, id);
        }
    }

    /// Stores a record's revealed output opening; the reveal is no longer due.
    fn put_output_reveal(&mut self, transfer_agent: &str, reveal: &OutputReveal) {
        self.put_proto(keys::reveal(&reveal.inference_id), reveal);
        self.delete_raw(keys::reveal_due(transfer_agent, &reveal.inference_id));
    }

    /// Notes that `transfer_agent` owes the reveal of `inference_id` by `deadline_height`.
    fn put_reveal_due(&mut self, transfer_agent: &str, inference_id: &str, deadline_height: u64) {
        let due = RevealDue {
            inference_id: inference_id.into(),
            deadline_height,
        };
        self.put_proto(keys::reveal_due(transfer_agent, inference_id), &due);
    }

    /// The reveal of `inference_id` is no longer waited for.
    fn drop_reveal_due(&mut self, transfer_agent: &str, inference_id: &str) {
        self.delete_raw(keys::reveal_due(transfer_agent, inference_id));
    }

    /// A fresh dispute id.
    fn next_dispute_id(&mut self) -> Result<u64> {
        let id = self
            .get_proto::<u64>(&keys::next_dispute_id())?
            .unwrap_or(0);
        self.put_proto(keys::next_dispute_id(), &(id + 1));
        Ok(id)
    }

    /// Stores a new dispute with its indexes (status, participants, deadline, record).
    fn insert_dispute(&mut self, d: &Dispute) {
        self.put_proto(keys::dispute(d.id), d);
        self.put_raw(keys::dispute_status(&d.status, d.id), Vec::new());
        let mut parties = vec![d.accuser.as_str(), d.executor_host.as_str()];
        parties.extend(d.committee.iter().map(String::as_str));
        for party in parties {
            self.put_raw(keys::participant_dispute(party, d.id), Vec::new());
        }
        if d.status == status::OPEN {
            self.put_raw(keys::dispute_deadline(d.deadline_height, d.id), Vec::new());
        }
        self.put_proto(keys::record_dispute(&d.inference_id), &d.id);
    }

    /// Queues dispute `id`, opened at `height`, for its committee draw in the next block.
    fn queue_committee_draw(&mut self, height: u64, id: u64) {
        self.put_raw(keys::committee_draw(height, id), Vec::new());
    }

    /// Removes and returns the disputes opened before `height` still waiting for a
    /// committee, in height then id order.
    fn take_committee_draws(&mut self, height: u64) -> Result<Vec<u64>> {
        take_due(
            self,
            &keys::committee_draws(),
            height,
            keys::parse_committee_draw,
        )
    }

    /// Indexes `member` as a party of dispute `id` (a committee drawn after the opening).
    fn add_dispute_party(&mut self, member: &str, id: u64) {
        self.put_raw(keys::participant_dispute(member, id), Vec::new());
    }

    /// Stores an updated dispute; moves its status index from `old_status`, and drops its
    /// deadline entry once it is no longer open.
    fn update_dispute(&mut self, d: &Dispute, old_status: &str) {
        self.put_proto(keys::dispute(d.id), d);
        if old_status != d.status {
            self.delete_raw(keys::dispute_status(old_status, d.id));
            self.put_raw(keys::dispute_status(&d.status, d.id), Vec::new());
        }
        if d.status != status::OPEN {
            self.delete_raw(keys::dispute_deadline(d.deadline_height, d.id));
        }
    }

    /// Moves open dispute `d`'s deadline (and its place in the deadline index) to `deadline`.
    fn move_dispute_deadline(&mut self, d: &mut Dispute, deadline: u64) {
        self.delete_raw(keys::dispute_deadline(d.deadline_height, d.id));
        d.deadline_height = deadline;
        self.put_raw(keys::dispute_deadline(deadline, d.id), Vec::new());
    }

    /// Stores an executor's statistics.
    fn put_executor_stats(&mut self, stats: &ExecutorStats) {
        self.put_proto(keys::executor_stats(&stats.host), stats);
    }

    /// Stores a validator's reputation.
    fn put_reputation(&mut self, reputation: &Reputation) {
        self.put_proto(keys::reputation(&reputation.validator), reputation);
    }

    /// Removes and returns the inference ids whose validation deadline is below `height`,
    /// in deadline then id order.
    fn take_validations_due(&mut self, height: u64) -> Result<Vec<String>> {
        take_due(
            self,
            &keys::validation_deadlines(),
            height,
            keys::parse_validation_deadline,
        )
    }

    /// Removes and returns the ids of the disputes whose deadline is below `height`, in
    /// deadline then id order.
    fn take_disputes_due(&mut self, height: u64) -> Result<Vec<u64>> {
        take_due(
            self,
            &keys::dispute_deadlines(),
            height,
            keys::parse_dispute_deadline,
        )
    }
}

impl<T: StateWrite + ?Sized> DisputesWrite for T {}

/// Removes the entries of the deadline index under `prefix` whose height (as `parse` reads
/// it from the key) is below `height`, and returns what `parse` found, in key order. An entry
/// `parse` cannot read is dropped rather than left to stall the index.
fn take_due<S: StateWrite + ?Sized, T>(
    state: &mut S,
    prefix: &[u8],
    height: u64,
    parse: fn(&[u8]) -> Option<(u64, T)>,
) -> Result<Vec<T>> {
    let mut due = Vec::new();
    for (key, _) in state.prefix_raw(prefix)? {
        match parse(&key) {
            Some((deadline, _)) if deadline >= height => break,
            Some((_, entry)) => due.push(entry),
            None => {}
        }
        state.delete_raw(key);
    }
    Ok(due)
}
