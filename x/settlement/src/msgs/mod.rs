//! Settlement messages: one file per message.

mod challenge_batch;
mod close_escrow;
mod demand_leaf;
mod dispute_leaf;
mod open_escrow;
mod provide_leaf;
mod settle_batch;

pub use settle_batch::check_batch;
mod top_up_escrow;

use gonka_auth::validate_address;
use gonka_inference::InferenceRead;
use gonka_sdk::{parse_amount, Any, ErrorCode, Msg, Result, StateRead};

use crate::{SettlementError, SettlementRead};
use gonka_proto::settlement::Escrow;

/// Decodes a settlement message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    open_escrow::decode(msg)
        .or_else(|| top_up_escrow::decode(msg))
        .or_else(|| close_escrow::decode(msg))
        .or_else(|| settle_batch::decode(msg))
        .or_else(|| challenge_batch::decode(msg))
        .or_else(|| demand_leaf::decode(msg))
        .or_else(|| provide_leaf::decode(msg))
        .or_else(|| dispute_leaf::decode(msg))
}

/// Stateless checks of an escrow message's parties and amount.
fn escrow_fields(requester: &str, agent: &str, amount: &str) -> Result<u128> {
    validate_address("requester", requester)?;
    validate_address("transfer_agent", agent)?;
    if requester == agent {
        return Err(SettlementError::InvalidEscrow.err(
            "requester and transfer_agent must be different accounts: an escrow pays another party",
        ));
    }
    parse_amount("amount", amount).map_err(|e| SettlementError::InvalidEscrow.err(e.log))
}

/// The open escrow of `requester` for `agent`.
fn open_escrow(state: &dyn StateRead, requester: &str, agent: &str) -> Result<Escrow> {
    state.escrow(requester, agent)?.ok_or_else(|| {
        SettlementError::UnknownEscrow.err(format!(
            "{requester} holds no escrow for transfer agent {agent}; open one with MsgOpenEscrow"
        ))
    })
}

/// `agent` is a registered transfer agent.
fn require_transfer_agent(state: &dyn StateRead, agent: &str) -> Result<()> {
    if state.transfer_agent(agent)?.is_none() {
        return Err(SettlementError::NotTransferAgent.err(format!(
            "{agent} is not a registered transfer agent; see /inference/transfer_agents"
        )));
    }
    Ok(())
}
