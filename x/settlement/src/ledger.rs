//! Where the money of a batch goes: paid out when its window closes, refunded when a
//! challenge voids it; and escrows returned when they are released.

use gonka_bank::{transfer, Coin};
use gonka_proto::settlement::{Batch, BatchStatus, MsgSettleBatch};
use gonka_sdk::{parse_amount, Result, StateWrite, PPM};
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
    queue_expiry(state, &batch)?;
    state.emit(events::finalized(&batch, commission));
    Ok(())
}

/// Voids `batch` for `reason` ([`void`]) and slashes its transfer agent, and `host` if it
/// is another participant, `fraud_slash_ppm` of their stake. What is slashed is shared so
/// that voiding one's own batch never pays: `challenger_bounty_ppm` of it to the challenger
/// (to the community pool when the challenger is a culprit); from the rest of the transfer
/// agent's slash, every host not at fault its line's payout (pro rata when it falls short:
/// it served, and the transfer agent's fault voided its pay); everything else to the
/// community pool. Emits `batch_voided` naming the challenge `kind` and the shares.
pub fn convict(
    state: &mut dyn StateWrite,
    batch: Batch,
    reason: String,
    host: Option<String>,
    challenger: &str,
    kind: &str,
) -> Result<()> {
    let msg = settled(&batch).clone();
    let agent = msg.transfer_agent.clone();
    let batch = void(state, batch, reason)?;
    let params = state.settlement_params()?;
    let host = host.filter(|h| *h != agent);
    // Slashed into the module pool, then shared out of it.
    let slash = |state: &mut dyn StateWrite, culprit: &str| -> Result<u128> {
        if state.participant(culprit)?.is_none() {
            return Ok(0);
        }
        gonka_stake::slash(state, culprit, params.fraud_slash_ppm, &pool_address())
    };
    let from_agent = slash(state, &agent)?;
    let from_host = match &host {
        Some(h) => slash(state, h)?,
        None => 0,
    };
    let slashed = from_agent + from_host;
    let community = gonka_rewards::community_pool_address();
    let bounty = slashed * u128::from(params.challenger_bounty_ppm) / u128::from(PPM);
    let culprit_challenged = challenger == agent || host.as_deref() == Some(challenger);
    pay(
        state,
        if culprit_challenged {
            &community
        } else {
            challenger
        },
        bounty,
    )?;
    // The bounty comes out of the agent's slash first, then the host's.
    let for_hosts = from_agent.saturating_sub(bounty);
    let wronged: Vec<(&str, u128)> = msg
        .hosts
        .iter()
        .filter(|l| Some(&l.host) != host.as_ref() && l.host != agent)
        .map(|l| Ok((l.host.as_str(), parse_amount("host payout", &l.payout)?)))
        .collect::<Result<_>>()?;
    let owed: u128 = wronged.iter().map(|(_, payout)| payout).sum();
    let mut hosts_paid = 0;
    for (wronged_host, payout) in wronged {
        let share = if owed <= for_hosts {
            payout
        } else {
            payout * for_hosts / owed
        };
        pay(state, wronged_host, share)?;
        hosts_paid += share;
    }
    pay(state, &community, slashed - bounty - hosts_paid)?;
    state.emit(
        events::voided(&batch, challenger, kind)
            .attr("slashed", format!("{slashed}ngnk"))
            .attr("bounty", format!("{bounty}ngnk"))
            .attr("hosts_paid", format!("{hosts_paid}ngnk")),
    );
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
    queue_expiry(state, &batch)?;
    Ok(batch)
}

/// Queues a batch that no longer changes to be pruned `batch_keep_secs` after its time.
fn queue_expiry(state: &mut dyn StateWrite, batch: &Batch) -> Result<()> {
    let keep = state.settlement_params()?.batch_keep_secs;
    let time = u64::try_from(batch.time).unwrap_or(0);
    state.queue_batch_expiry(time.saturating_add(keep), batch.id);
    Ok(())
}

/// Batches pruned per block at most (the rest wait for the next blocks).
pub const PRUNE_PER_BLOCK: usize = 100;

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

/// Settles the leaf demands whose deadline passed unanswered: the batch, if still pending,
/// is voided as withholding its leaf, and each deposit goes back to its challenger.
pub fn expire_demands(state: &mut dyn StateWrite, height: u64) -> Result<()> {
    for demand in state.take_expired_demands(height)? {
        pay(
            state,
            &demand.challenger,
            parse_amount("deposit", &demand.deposit)?,
        )?;
        let Some(batch) = state.batch(demand.batch_id)? else {
            continue;
        };
        if batch.status == BatchStatus::Pending as i32 {
            let reason = format!(
                "leaf {} was demanded and not provided by height {}",
                demand.index, demand.deadline
            );
            convict(
                state,
                batch,
                reason,
                None,
                &demand.challenger,
                "withheld_leaf",
            )?;
        }
    }
    Ok(())
}

/// Pays out the batches whose window closes at `height`; one whose leaves were not sampled
/// yet (no group signed a height since it settled) waits a block more.
pub fn finalize_due(state: &mut dyn StateWrite, height: u64) -> Result<()> {
    for id in state.take_finals(height)? {
        let Some(mut batch) = state.batch(id)? else {
            continue;
        };
        if batch.status != BatchStatus::Pending as i32 {
            continue;
        }
        if state.is_unsampled(id)? {
            batch.final_at = height + 1;
            state.put_batch(&batch);
        } else {
            finalize(state, batch)?;
        }
    }
    Ok(())
}
