//! Settlement events. Amounts carry their denom (`123ngnk`), like bank and stake events.

use gonka_proto::settlement::{Batch, Escrow, LeafDemand};
use gonka_sdk::Event;

fn escrow_event(kind: &str, escrow: &Escrow) -> Event {
    Event::new(kind)
        .attr("requester", &escrow.requester)
        .attr("transfer_agent", &escrow.transfer_agent)
        .attr("balance", format!("{}ngnk", escrow.balance))
        .attr("expires_at", escrow.expires_at)
        .attr("release_at", escrow.release_at)
}

/// `escrow_opened`, `escrow_topped_up` or `escrow_closing`.
pub fn escrow(kind: &str, escrow: &Escrow) -> Event {
    escrow_event(kind, escrow)
}

/// `escrow_released`: the remainder went back to the requester.
pub fn released(escrow: &Escrow) -> Event {
    escrow_event("escrow_released", escrow)
}

fn batch_event(kind: &str, batch: &Batch) -> Event {
    let settled = batch.settled.clone().unwrap_or_default();
    Event::new(kind)
        .attr("batch_id", batch.id)
        .attr("transfer_agent", &settled.transfer_agent)
        .attr("number", settled.number)
        .attr("root", hex::encode(&settled.root))
        .attr("records", settled.record_count)
        .attr("total", format!("{}ngnk", settled.total))
        .attr("final_at", batch.final_at)
}

/// `batch_settled`: escrows debited, payouts waiting for the challenge window.
pub fn settled(batch: &Batch) -> Event {
    batch_event("batch_settled", batch)
}

/// `batch_final`: hosts and the transfer agent paid, work credited.
pub fn finalized(batch: &Batch, commission: u128) -> Event {
    batch_event("batch_final", batch).attr("commission", format!("{commission}ngnk"))
}

/// `batch_voided`: a challenge succeeded; requesters refunded.
pub fn voided(batch: &Batch, challenger: &str, kind: &str) -> Event {
    batch_event("batch_voided", batch)
        .attr("challenger", challenger)
        .attr("challenge", kind)
        .attr("reason", &batch.voided_reason)
}

/// `leaf_demanded` or `leaf_provided`.
pub fn demand(kind: &str, demand: &LeafDemand) -> Event {
    Event::new(kind)
        .attr("batch_id", demand.batch_id)
        .attr("index", demand.index)
        .attr("challenger", &demand.challenger)
        .attr("deposit", format!("{}ngnk", demand.deposit))
        .attr("deadline", demand.deadline)
}

/// `leaves_sampled`: `count` leaves of `batch` were sampled for validation at `rate_ppm` and
/// are demanded from its transfer agent by `deadline`.
pub fn sampled(batch: &Batch, rate_ppm: u64, count: u64, deadline: u64) -> Event {
    batch_event("leaves_sampled", batch)
        .attr("rate_ppm", rate_ppm)
        .attr("count", count)
        .attr("deadline", deadline)
}

/// `work_not_credited`: a host of a final batch was paid but, jailed or gone, not credited.
pub fn not_credited(batch_id: u64, host: &str, units: u64) -> Event {
    Event::new("work_not_credited")
        .attr("batch_id", batch_id)
        .attr("host", host)
        .attr("units", units)
}
