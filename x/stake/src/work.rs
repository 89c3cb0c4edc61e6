//! The work ledger: verified work units per participant per epoch. The inference module
//! credits work as it is verified; the disputes module voids work found invalid. Rewards and
//! the Sprint power rule read the closing epoch's ledger.
//!
//! Voiding work of an epoch that has already been settled changes the ledger (and so any
//! later query) but does not claw back rewards already paid: disputes punish by slashing.

use gonka_proto::stake::WorkRecord;
use gonka_sdk::{ErrorCode, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::{keys, StakeError, StakeRead};

/// Work units of `operator` in `epoch` (zero if none).
pub fn work_of(state: &dyn StateRead, epoch: u64, operator: &str) -> Result<u64> {
    Ok(state
        .get_proto::<u64>(&keys::work(epoch, operator))?
        .unwrap_or(0))
}

/// Every participant's work in `epoch`, ascending by operator address, zero entries omitted.
pub fn epoch_work(state: &dyn StateRead, epoch: u64) -> Result<Vec<WorkRecord>> {
    let prefix = keys::work_of_epoch(epoch);
    state
        .prefix_proto::<u64>(&prefix)?
        .into_iter()
        .map(|(key, units)| {
            let operator = String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
            Ok(WorkRecord {
                epoch,
                operator,
                units,
            })
        })
        .collect()
}

/// Credits `units` of verified work to `operator` in the current epoch. The operator must be
/// a participant that is not jailed.
pub fn credit_work(state: &mut dyn StateWrite, operator: &str, units: u64) -> Result<()> {
    let participant = state.existing_participant(operator)?;
    if participant.jailed {
        return Err(StakeError::Jailed.err(format!(
            "participant {operator} is jailed and cannot be credited work"
        )));
    }
    let epoch = gonka_epochs::current(state)?;
    let total = work_of(state, epoch, operator)?.saturating_add(units);
    state.put_proto(keys::work(epoch, operator), &total);
    state.emit(
        gonka_sdk::Event::new("work_credited")
            .attr("operator", operator)
            .attr("epoch", epoch)
            .attr("units", units),
    );
    Ok(())
}

/// Removes `units` of work of `operator` in `epoch` that were found invalid.
pub fn void_work(state: &mut dyn StateWrite, operator: &str, epoch: u64, units: u64) -> Result<()> {
    let credited = work_of(state, epoch, operator)?;
    let remaining = credited.checked_sub(units).ok_or_else(|| {
        StakeError::InvalidWork.err(format!(
            "cannot void {units} work units of {operator} in epoch {epoch}: only {credited} were credited"
        ))
    })?;
    if remaining == 0 {
        state.delete_raw(keys::work(epoch, operator));
    } else {
        state.put_proto(keys::work(epoch, operator), &remaining);
    }
    state.emit(
        gonka_sdk::Event::new("work_voided")
            .attr("operator", operator)
            .attr("epoch", epoch)
            .attr("units", units),
    );
    Ok(())
}
