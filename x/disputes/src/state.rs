//! Typed access to disputes state; other crates use these traits, never the keys.

use gonka_auth::module_address;
use gonka_proto::disputes::{Dispute, ExecutorStats, Params, Reputation, Validation};
use gonka_sdk::{Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

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

    /// Validations still owed by `validator`, ascending by inference id.
    fn pending_validations(&self, validator: &str) -> Result<Vec<Validation>> {
        let mut validations = Vec::new();
        for (_, id) in self.prefix_raw(&keys::pending_of(validator))? {
            if let Some(v) = self.validation(&String::from_utf8_lossy(&id))? {
                validations.push(v);
            }
        }
        Ok(validations)
    }

    /// A dispute by id.
    fn dispute(&self, id: u64) -> Result<Option<Dispute>> {
        self.get_proto(&keys::dispute(id))
    }

    /// Every dispute, ascending by id.
    fn all_disputes(&self) -> Result<Vec<Dispute>> {
        Ok(self
            .prefix_proto(&keys::disputes())?
            .into_iter()
            .map(|(_, d)| d)
            .collect())
    }

    /// Disputes with `status`, ascending by id.
    fn disputes_with_status(&self, status: &str) -> Result<Vec<Dispute>> {
        self.disputes_by_index(&keys::disputes_with_status(status))
    }

    /// Disputes `address` takes part in (accuser, executor host, committee), ascending by id.
    fn disputes_of(&self, address: &str) -> Result<Vec<Dispute>> {
        self.disputes_by_index(&keys::disputes_of(address))
    }

    /// Disputes whose ids are the suffixes of the keys under `prefix`.
    fn disputes_by_index(&self, prefix: &[u8]) -> Result<Vec<Dispute>> {
        let mut disputes = Vec::new();
        for (key, _) in self.prefix_raw(prefix)? {
            let id = std::str::from_utf8(&key[prefix.len()..])
                .ok()
                .and_then(|s| s.parse().ok());
            if let Some(dispute) = id.map(|id| self.dispute(id)).transpose()?.flatten() {
                disputes.push(dispute);
            }
        }
        Ok(disputes)
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
    /// status.
    fn put_validation(&mut self, v: &Validation) {
        self.put_proto(keys::validation(&v.inference_id), v);
        let pending = keys::pending(&v.validator, &v.inference_id);
        let deadline = keys::validation_deadline(v.deadline_height, &v.inference_id);
        if v.status == status::PENDING {
            self.put_raw(pending, v.inference_id.as_bytes().to_vec());
            self.put_raw(deadline, v.inference_id.as_bytes().to_vec());
        } else {
            self.delete_raw(pending);
            self.delete_raw(deadline);
        }
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
