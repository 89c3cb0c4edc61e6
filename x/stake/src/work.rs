//! The work ledger: verified work units per participant per epoch. The inference module
//! credits work as it is verified; the disputes module voids work found invalid. Rewards and
//! the Sprint power rule read the closing epoch's ledger.
//!
//! Voiding work of an epoch that has already been settled changes the ledger (and so any
//! later query) but does not claw back rewards already paid: disputes punish by slashing.
//! Work voided beyond what its epoch credited (work of a committed batch is credited when
//! the batch becomes final, which may come after the dispute) becomes the participant's
//! `work_debt`, taken from its next credits: voided work is never counted.

use gonka_sdk::{ErrorCode, Result, StateWrite};

use crate::{StakeError, StakeRead, StakeWrite};

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
    let owed = participant.work_debt.min(units);
    if owed > 0 {
        let mut participant = participant;
        participant.work_debt -= owed;
        state.put_participant(&participant);
    }
    let total = state
        .work_units(epoch, operator)?
        .saturating_add(units - owed);
    state.put_work_units(epoch, operator, total);
    state.emit(
        gonka_sdk::Event::new("work_credited")
            .attr("operator", operator)
            .attr("epoch", epoch)
            .attr("units", units - owed)
            .attr("debt_paid", owed),
    );
    Ok(())
}

/// Voids `units` of `operator`'s work found invalid: what `epoch` credited it first, the rest
/// as a debt its next credits pay ([`credit_work`]).
pub fn void_work_or_owe(
    state: &mut dyn StateWrite,
    operator: &str,
    epoch: u64,
    units: u64,
) -> Result<()> {
    let credited = units.min(state.work_units(epoch, operator)?);
    if credited > 0 {
        void_work(state, operator, epoch, credited)?;
    }
    let owed = units - credited;
    if owed > 0 {
        if let Some(mut participant) = state.participant(operator)? {
            participant.work_debt = participant.work_debt.saturating_add(owed);
            state.put_participant(&participant);
            state.emit(
                gonka_sdk::Event::new("work_owed")
                    .attr("operator", operator)
                    .attr("units", owed)
                    .attr("debt", participant.work_debt),
            );
        }
    }
    Ok(())
}

/// Removes `units` of work of `operator` in `epoch` that were found invalid.
pub fn void_work(state: &mut dyn StateWrite, operator: &str, epoch: u64, units: u64) -> Result<()> {
    let credited = state.work_units(epoch, operator)?;
    let remaining = credited.checked_sub(units).ok_or_else(|| {
        StakeError::InvalidWork.err(format!(
            "cannot void {units} work units of {operator} in epoch {epoch}: only {credited} were credited"
        ))
    })?;
    if remaining == 0 {
        state.delete_work_units(epoch, operator);
    } else {
        state.put_work_units(epoch, operator, remaining);
    }
    state.emit(
        gonka_sdk::Event::new("work_voided")
            .attr("operator", operator)
            .attr("epoch", epoch)
            .attr("units", units),
    );
    Ok(())
}
