//! Where the money of a batch goes: paid out when its window closes, refunded when a
//! challenge voids it; and escrows returned when they are released.

use gonka_bank::{transfer, Coin};
use gonka_proto::settlement::{Batch, BatchStatus, MsgSettleBatch};
use gonka_sdk::{parse_amount, Result, StateWrite};
use gonka_stake::StakeRead;

use crate::{escrow_balance, events, pool_address, SettlementRead, SettlementWrite};

fn pay(state: &mut dyn StateWrite, to: &str, amount: u128) -> Result<()> {
    if amount == 0 {
        return Ok(());
    }
    transfer(state, &pool_address(), to, &Coin::ngnk(amount))
}

/// The batch's message (stored batches always carry it).
pub(crate) fn settled(batch: &Batch) -> &MsgSettleBatch {
    batch
        .settled
        .as_ref()
        .expect("stored batches carry their message")
}

/// Pays a pending batch out: each host its payout and work credit (none for a host that is
/// jailed or no longer a participant: event `work_not_credited`), the transfer agent the
/// rest of the total (its commission).
pub fn finalize(state: &mut dyn StateWrite, mut batch: Batch) -> Result<()> {
    let msg = settled(&batch).clone();
    let total = parse_amount("batch total", &msg.total)?;
    let mut paid = 0u128;
    for line in &msg.hosts {
        let payout = parse_amount("host payout", &line.payout)?;
        pay(state, &line.host, payout)?;
        paid += payout;
        let creditable = state.participant(&line.host)?.is_some_and(|p| !p.jailed);
        if creditable {
            gonka_stake::credit_work(state, &line.host, line.work_units)?;
        } else {
            state.emit(events::not_credited(batch.id, &line.host, line.work_units));
        }
    }
    // MsgSettleBatch checked the payouts do not exceed the total.
    let commission = total - paid;
    pay(state, &msg.transfer_agent, commission)?;
    batch.status = BatchStatus::Final as i32;
    state.put_batch(&batch);
    state.emit(events::finalized(&batch, commission));
    Ok(())
}

/// Voids a pending batch: every requester's debit goes back to its escrow (or, once that
/// is released, to the requester).
pub fn void(state: &mut dyn StateWrite, mut batch: Batch, reason: String) -> Result<Batch> {
    let msg = settled(&batch).clone();
    for line in &msg.requesters {
        let amount = parse_amount("requester total", &line.amount)?;
        refund(state, &line.requester, &msg.transfer_agent, amount)?;
    }
    batch.status = BatchStatus::Voided as i32;
    batch.voided_reason = reason;
    state.put_batch(&batch);
    Ok(batch)
}

fn refund(state: &mut dyn StateWrite, requester: &str, agent: &str, amount: u128) -> Result<()> {
    match state.escrow(requester, agent)? {
        Some(mut escrow) => {
            let balance = escrow_balance(&escrow)? + amount;
            escrow.balance = balance.to_string();
            let release = escrow.release_at;
            state.put_escrow(&escrow, Some(release));
            Ok(())
        }
        None => pay(state, requester, amount),
    }
}

/// Releases the escrows due at `height`: each remainder to its requester.
pub fn release_due(state: &mut dyn StateWrite, height: u64) -> Result<()> {
    for (requester, agent) in state.take_releases(height)? {
        let Some(escrow) = state.escrow(&requester, &agent)? else {
            continue;
        };
        pay(state, &requester, escrow_balance(&escrow)?)?;
        state.delete_escrow(&escrow);
        state.emit(events::released(&escrow));
    }
    Ok(())
}

/// Pays out the batches whose window closes at `height`.
pub fn finalize_due(state: &mut dyn StateWrite, height: u64) -> Result<()> {
    for id in state.take_finals(height)? {
        if let Some(batch) = state.batch(id)? {
            if batch.status == BatchStatus::Pending as i32 {
                finalize(state, batch)?;
            }
        }
    }
    Ok(())
}
