//! `MsgTopUpEscrow`: a requester adds to its escrow and may push its expiry later.

use gonka_bank::{transfer, Coin};
use gonka_proto::settlement::MsgTopUpEscrow;
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{escrow_fields, open_escrow};
use crate::{
    escrow_balance, events, pool_address, SettlementError, SettlementRead, SettlementWrite,
};

struct TopUpEscrow {
    msg: MsgTopUpEscrow,
    amount: u128,
}

/// Decodes and statelessly checks a `MsgTopUpEscrow`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgTopUpEscrow>(any).map(|msg| {
        let msg = msg?;
        let amount = escrow_fields(&msg.requester, &msg.transfer_agent, &msg.amount)?;
        Ok(Box::new(TopUpEscrow { msg, amount }) as Box<dyn Msg>)
    })
}

impl Msg for TopUpEscrow {
    fn signer(&self) -> &str {
        &self.msg.requester
    }

    /// Refused once the escrow is closing: its holder already asked for the money back.
    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let (requester, agent) = (&self.msg.requester, &self.msg.transfer_agent);
        let height = ctx.block.height;
        let mut escrow = open_escrow(state, requester, agent)?;
        if escrow.expires_at <= height {
            return Err(SettlementError::InvalidEscrow.err(format!(
                "the escrow of {requester} for {agent} is closing since height {}; open a new one after its release at {}",
                escrow.expires_at, escrow.release_at
            )));
        }
        let expires_at = match self.msg.expires_at {
            0 => escrow.expires_at,
            later if later >= escrow.expires_at => later,
            earlier => {
                return Err(SettlementError::InvalidEscrow.err(format!(
                    "expires_at {earlier} is before the escrow's {}; close it with MsgCloseEscrow instead",
                    escrow.expires_at
                )))
            }
        };
        if self.amount > 0 {
            transfer(state, requester, &pool_address(), &Coin::ngnk(self.amount))?;
        }
        let window = state.settlement_params()?.challenge_window_blocks;
        let previous = escrow.release_at;
        escrow.balance = (escrow_balance(&escrow)? + self.amount).to_string();
        escrow.expires_at = expires_at;
        escrow.release_at = expires_at.saturating_add(window);
        state.put_escrow(&escrow, Some(previous));
        state.emit(events::escrow("escrow_topped_up", &escrow));
        Ok(())
    }
}
