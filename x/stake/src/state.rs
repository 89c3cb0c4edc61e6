//! Typed access to stake state; other crates use these traits, never the keys.

use gonka_auth::module_address;
use gonka_proto::query::page::PageRequest;
use gonka_proto::stake::{Participant, SigningInfo, UnbondingEntry, WorkCredit};
use gonka_sdk::{
    paginate, paginate_proto, parse_amount, ErrorCode, Page, Result, SdkError, StateRead,
    StateReadExt, StateWrite, StateWriteExt,
};
use sha2::{Digest, Sha256};

use crate::{default_params, keys, StakeError, StakeParams, BONDED_POOL, UNBONDING_POOL};

/// A consensus key's CometBFT address: the first 20 bytes of its SHA-256.
pub fn consensus_address(pubkey: &[u8]) -> [u8; 20] {
    let digest = Sha256::digest(pubkey);
    let mut address = [0; 20];
    address.copy_from_slice(&digest[..20]);
    address
}

/// Address of the module account holding bonded stake.
pub fn bonded_pool_address() -> String {
    module_address(BONDED_POOL)
}

/// Address of the module account holding unbonding stake.
pub fn unbonding_pool_address() -> String {
    module_address(UNBONDING_POOL)
}

/// A participant's bonded stake as a number.
pub fn bonded(participant: &Participant) -> Result<u128> {
    parse_amount("bonded", &participant.bonded)
}

/// An unbonding entry's amount as a number.
pub fn unbonding_amount(entry: &UnbondingEntry) -> Result<u128> {
    parse_amount("unbonding amount", &entry.amount)
}

/// The unbonding entry that `operator`'s index entry `key` (under `prefix`) names.
fn indexed_unbonding<S: StateRead + ?Sized>(
    state: &S,
    operator: &str,
    prefix: &[u8],
    key: &[u8],
) -> Result<UnbondingEntry> {
    let (epoch, id) = keys::parse_unbonding_of(prefix, key).ok_or_else(|| {
        SdkError::Internal.err(format!("malformed unbonding index key under {operator}"))
    })?;
    state
        .get_proto::<UnbondingEntry>(&keys::unbonding(epoch, operator, id))?
        .ok_or_else(|| {
            SdkError::Internal.err(format!(
                "the unbonding index of {operator} names a missing entry {id}"
            ))
        })
}

/// Reads of stake state.
pub trait StakeRead: StateRead {
    /// Current parameters, parsed.
    fn stake_params(&self) -> Result<StakeParams> {
        let stored = self.get_proto(&keys::params())?;
        StakeParams::from_proto(&stored.unwrap_or_else(default_params))
    }

    /// The participant operated by `operator`.
    fn participant(&self, operator: &str) -> Result<Option<Participant>> {
        self.get_proto(&keys::participant(operator))
    }

    /// The participant operated by `operator`, or `UnknownParticipant`.
    fn existing_participant(&self, operator: &str) -> Result<Participant> {
        self.participant(operator)?.ok_or_else(|| {
            StakeError::UnknownParticipant.err(format!(
                "{operator} is not a participant; create one with `gonkad tx stake create`"
            ))
        })
    }

    /// Every participant, ascending by operator address.
    fn participants(&self) -> Result<Vec<Participant>> {
        Ok(self
            .prefix_proto(&keys::participants())?
            .into_iter()
            .map(|(_, p)| p)
            .collect())
    }

    /// The operator whose consensus key has CometBFT address `address`, if any.
    fn consensus_address_owner(&self, address: &[u8; 20]) -> Result<Option<String>> {
        Ok(self
            .get_raw(&keys::consensus_address(address))?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// A validator's liveness record, if it is being counted.
    fn signing_info(&self, operator: &str) -> Result<Option<SigningInfo>> {
        self.get_proto(&keys::signing_info(operator))
    }

    /// The operator whose consensus key is `pubkey`, if any.
    fn consensus_key_owner(&self, pubkey: &[u8]) -> Result<Option<String>> {
        Ok(self
            .get_raw(&keys::consensus_key(pubkey))?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Every unbonding entry, by completion epoch then operator.
    fn unbonding_entries(&self) -> Result<Vec<UnbondingEntry>> {
        Ok(self
            .prefix_proto(&keys::unbondings())?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// The unbonding entries paid at the end of `epoch`, by operator then id.
    fn unbondings_completing(&self, epoch: u64) -> Result<Vec<UnbondingEntry>> {
        Ok(self
            .prefix_proto(&keys::unbondings_completing(epoch))?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// `operator`'s unbonding entries, by completion epoch then id (through the index by
    /// operator: as many reads as it has entries, at most `max_unbonding_entries`).
    fn operator_unbondings(&self, operator: &str) -> Result<Vec<UnbondingEntry>> {
        let prefix = keys::unbondings_of(operator);
        self.prefix_raw(&prefix)?
            .iter()
            .map(|(key, _)| indexed_unbonding(self, operator, &prefix, key))
            .collect()
    }

    /// One page of the participants, by operator address.
    fn participants_page(&self, page: Option<&PageRequest>) -> Result<Page<Participant>> {
        paginate_proto(self, &keys::participants(), page, |_, p| Ok(Some(p)))
    }

    /// One page of the unbonding entries: all of them by completion epoch then operator, or
    /// `operator`'s by completion epoch (through the index by operator).
    fn unbonding_page(
        &self,
        operator: &str,
        page: Option<&PageRequest>,
    ) -> Result<Page<UnbondingEntry>> {
        if operator.is_empty() {
            return paginate_proto(self, &keys::unbondings(), page, |_, e| Ok(Some(e)));
        }
        let prefix = keys::unbondings_of(operator);
        paginate(self, &prefix, page, |key, _| {
            indexed_unbonding(self, operator, &prefix, key).map(Some)
        })
    }

    /// One page of the work ledger of `epoch`, by operator address.
    fn work_page(&self, epoch: u64, page: Option<&PageRequest>) -> Result<Page<WorkCredit>> {
        paginate_proto(
            self,
            &keys::work_of_epoch(epoch),
            page,
            |key, units: u64| {
                Ok(keys::parse_work(epoch, key).map(|operator| WorkCredit {
                    epoch,
                    operator,
                    units,
                }))
            },
        )
    }

    /// Work units of `operator` in `epoch` (zero if none).
    fn work_units(&self, epoch: u64, operator: &str) -> Result<u64> {
        Ok(self
            .get_proto::<u64>(&keys::work(epoch, operator))?
            .unwrap_or(0))
    }

    /// The work ledger of `epoch`, ascending by operator address.
    fn work_credits(&self, epoch: u64) -> Result<Vec<WorkCredit>> {
        Ok(self
            .prefix_proto::<u64>(&keys::work_of_epoch(epoch))?
            .into_iter()
            .filter_map(|(key, units)| {
                keys::parse_work(epoch, &key).map(|operator| WorkCredit {
                    epoch,
                    operator,
                    units,
                })
            })
            .collect())
    }
}

impl<T: StateRead + ?Sized> StakeRead for T {}

/// Writes of stake state.
pub trait StakeWrite: StateWrite {
    /// Replaces the parameters.
    fn put_stake_params(&mut self, params: &StakeParams) {
        self.put_proto(keys::params(), &params.to_proto());
    }

    /// Stores `participant`, and its consensus key in the uniqueness index and, by its
    /// CometBFT address, in the index commits and evidence are read through.
    fn put_participant(&mut self, participant: &Participant) {
        if !participant.consensus_pubkey.is_empty() {
            self.put_raw(
                keys::consensus_key(&participant.consensus_pubkey),
                participant.operator.as_bytes().to_vec(),
            );
            self.put_raw(
                keys::consensus_address(&consensus_address(&participant.consensus_pubkey)),
                participant.operator.as_bytes().to_vec(),
            );
        }
        self.put_proto(keys::participant(&participant.operator), participant);
    }

    /// Stores an unbonding entry and its index entry under its operator.
    fn put_unbonding(&mut self, entry: &UnbondingEntry) {
        self.put_proto(
            keys::unbonding(entry.completes_epoch, &entry.operator, entry.id),
            entry,
        );
        self.put_raw(
            keys::unbonding_of(&entry.operator, entry.completes_epoch, entry.id),
            Vec::new(),
        );
    }

    /// Stores a validator's liveness record.
    fn put_signing_info(&mut self, info: &SigningInfo) {
        self.put_proto(keys::signing_info(&info.operator), info);
    }

    /// Forgets a validator's liveness record (it starts afresh).
    fn delete_signing_info(&mut self, operator: &str) {
        self.delete_raw(keys::signing_info(operator));
    }

    /// Removes an unbonding entry and its index entry.
    fn delete_unbonding(&mut self, entry: &UnbondingEntry) {
        self.delete_raw(keys::unbonding(
            entry.completes_epoch,
            &entry.operator,
            entry.id,
        ));
        self.delete_raw(keys::unbonding_of(
            &entry.operator,
            entry.completes_epoch,
            entry.id,
        ));
    }

    /// A fresh unbonding entry id.
    fn next_unbonding_id(&mut self) -> Result<u64> {
        let id = self
            .get_proto::<u64>(&keys::next_unbonding_id())?
            .unwrap_or(0);
        self.put_proto(keys::next_unbonding_id(), &(id + 1));
        Ok(id)
    }

    /// Sets the work units of `operator` in `epoch`.
    fn put_work_units(&mut self, epoch: u64, operator: &str, units: u64) {
        self.put_proto(keys::work(epoch, operator), &units);
    }

    /// Removes `operator`'s line of the work ledger of `epoch`.
    fn delete_work_units(&mut self, epoch: u64, operator: &str) {
        self.delete_raw(keys::work(epoch, operator));
    }

    /// Queues `operator` to leave the validator set at the end of this block.
    fn queue_jailing(&mut self, operator: &str) {
        self.put_raw(keys::jail_queued(operator), operator.as_bytes().to_vec());
    }

    /// Stores `participant` after its bond went down (unstake, slash); when the bond is now
    /// below `min_stake`, queues it for [`take_fallen_below_min`].
    fn put_reduced_participant(&mut self, participant: &Participant) -> Result<()> {
        self.put_participant(participant);
        if bonded(participant)? < self.stake_params()?.min_stake {
            self.put_raw(
                keys::below_min_queued(&participant.operator),
                participant.operator.as_bytes().to_vec(),
            );
        }
        Ok(())
    }

    /// Removes and returns the operators queued for leaving the validator set, in order.
    fn take_jail_queue(&mut self) -> Result<Vec<String>> {
        let mut operators = Vec::new();
        for (key, operator) in self.prefix_raw(&keys::jail_queue())? {
            operators.push(String::from_utf8_lossy(&operator).into_owned());
            self.delete_raw(key);
        }
        Ok(operators)
    }
}

impl<T: StateWrite + ?Sized> StakeWrite for T {}

/// Removes and returns the participants whose bond fell below `min_stake` since the last
/// call, ascending by operator, that are still below it (a participant that staked again in
/// the same block is not returned). Work proportional to this block's unstakes and slashes.
pub fn take_fallen_below_min(state: &mut dyn StateWrite) -> Result<Vec<String>> {
    let min_stake = state.stake_params()?.min_stake;
    let mut fallen = Vec::new();
    for (key, operator) in state.prefix_raw(&keys::below_min_queue())? {
        state.delete_raw(key);
        let operator = String::from_utf8_lossy(&operator).into_owned();
        let still_below = match state.participant(&operator)? {
            Some(p) => bonded(&p)? < min_stake,
            None => true,
        };
        if still_below {
            fallen.push(operator);
        }
    }
    Ok(fallen)
}
