//! `MsgOpenEscrow`: a requester sets money aside for one transfer agent.

use gonka_bank::{transfer, Coin};
use gonka_proto::settlement::{Escrow, MsgOpenEscrow};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{escrow_fields, require_transfer_agent};
use crate::{events, pool_address, SettlementError, SettlementRead, SettlementWrite};

struct OpenEscrow {
    msg: MsgOpenEscrow,
    amount: u128,
}

/// Decodes and statelessly checks a `MsgOpenEscrow`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgOpenEscrow>(any).map(|msg| {
        let msg = msg?;
        let amount = escrow_fields(&msg.requester, &msg.transfer_agent, &msg.amount)?;
        if amount == 0 {
            return Err(
                SettlementError::InvalidEscrow.err("an escrow opens with a positive amount")
            );
        }
        Ok(Box::new(OpenEscrow { msg, amount }) as Box<dyn Msg>)
    })
}

impl Msg for OpenEscrow {
    fn signer(&self) -> &str {
        &self.msg.requester
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let (requester, agent) = (&self.msg.requester, &self.msg.transfer_agent);
        let height = ctx.block.height;
        if self.msg.expires_at <= height {
            return Err(SettlementError::InvalidEscrow.err(format!(
                "expires_at {} must be after the current height {height}",
                self.msg.expires_at
            )));
        }
        require_transfer_agent(state, agent)?;
        if state.escrow(requester, agent)?.is_some() {
            return Err(SettlementError::EscrowExists.err(format!(
                "{requester} already holds an escrow for {agent}; add to it with MsgTopUpEscrow"
            )));
        }
        let window = state.settlement_params()?.challenge_window_blocks;
        transfer(state, requester, &pool_address(), &Coin::ngnk(self.amount))?;
        let escrow = Escrow {
            requester: requester.clone(),
            transfer_agent: agent.clone(),
            balance: self.amount.to_string(),
            expires_at: self.msg.expires_at,
            release_at: self.msg.expires_at.saturating_add(window),
        };
        state.put_escrow(&escrow, None);
        state.emit(events::escrow("escrow_opened", &escrow));
        Ok(())
    }
}
