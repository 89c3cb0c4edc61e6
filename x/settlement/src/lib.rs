//! x/settlement: how served work is paid, at the rate the chain can carry.
//!
//! Requesters escrow money for a transfer agent (`MsgOpenEscrow`, `MsgTopUpEscrow`,
//! `MsgCloseEscrow`); requests stay signed off chain in the request/v3 format, and the
//! escrow is the one named by the request's signed `transfer_agent`. The transfer agent
//! commits batches of served records with `MsgSettleBatch`: the root of a Merkle sum tree
//! over the records (gonka-proto `batch`: each node sums the charges and the work units below
//! it), per-requester totals, per-host work and payouts, and one aggregate BLS signature of
//! all the hosts over the whole message. The chain checks a constant amount per batch (the
//! lines' arithmetic — requester lines adding up to the root's charge, host lines to its
//! work, each host line's work no more than its payout buys at the cheapest work on chain —
//! one fast-aggregate verification, one escrow debit per requester), never a record.
//!
//! # Money
//! Escrows and pending debits sit in the module account [`pool_address`]. A batch debits
//! each requester's escrow when it lands; it becomes final `challenge_window_blocks` later
//! ([`hooks::begin_block`]): hosts get their payouts and their work units are credited to
//! the epoch in which the batch becomes final (a batch that might still be voided credits
//! nothing), and the transfer agent gets the rest of the total, its commission. A closed or
//! expired escrow still pays batches for a window after it starts closing, then returns
//! the remainder.
//!
//! # Challenges and why the window is safe
//! Every record stays provable: the transfer agent serves any leaf with its proof, and
//! anyone holding leaves can send `MsgChallengeBatch` while the batch is pending (kinds in
//! [`challenge`]: a leaf that breaks its own rules, leaves out of order, a sum that does not
//! add up, a requester or host line that is not its leaves', an inference id settled twice).
//! Each is decided from at most four leaves and their O(log n) paths. Success voids the
//! batch (requesters refunded, nobody paid or credited) and slashes the transfer agent — and
//! a host that co-signed a bad leaf or its own wrong line, but never for a leaf's age, since
//! when a batch lands is its transfer agent's choice — `fraud_slash_ppm` of stake: a tenth
//! to the challenger, the hosts not at fault paid their lines from it, the rest to the
//! community pool. The window is safe when an honest watcher can fetch and check a batch
//! within it: genesis keeps it at most inference's `payload_retention_blocks` (the leaves
//! are still served) and shorter than stake's unbonding (the stake to slash cannot leave
//! first). Until a batch is final nothing it claims has paid anybody.
//!
//! # Validation
//! Records of committed batches are re-executed like records settled one by one: the block
//! after a batch, a `leaf_sample_ppm` share of its leaves is drawn from the beacon and
//! demanded from its transfer agent, and every provided leaf becomes a work record of
//! x/inference that x/disputes samples, validates and disputes as usual ([`sampling`]).
//!
//! # Replays
//! Each transfer agent numbers its batches 1, 2, … and the hosts sign the number, so a
//! batch cannot land twice; the same record in two batches is the `duplicate` challenge.

pub mod challenge;
mod errors;
mod events;
mod genesis;
mod hooks;
pub mod keys;
pub mod ledger;
mod msgs;
pub use msgs::check_batch;
mod params;
mod query;
pub mod sampling;
mod state;

pub use errors::SettlementError;
pub use params::{default_params, validate_params};
pub use state::{escrow_balance, pool_address, SettlementRead, SettlementWrite};

use gonka_sdk::{Any, BlockContext, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "settlement";

/// Name of the module account holding escrows and pending debits.
pub const POOL: &str = "settlement_pool";

/// The settlement module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Settlement;

impl Module for Settlement {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        hooks::begin_block(ctx, state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
