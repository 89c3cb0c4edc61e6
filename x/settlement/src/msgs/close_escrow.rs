//! `MsgCloseEscrow`: a requester starts closing its escrow; the remainder returns a
//! challenge window later (batches of requests already served may still debit it until then).

use gonka_auth::validate_address;
use gonka_proto::settlement::MsgCloseEscrow;
use gonka_sdk::{decode_as, Any, Msg, Result, StateWrite, TxContext};

use super::open_escrow;
use crate::{events, SettlementRead, SettlementWrite};

struct CloseEscrow(MsgCloseEscrow);

/// Decodes and statelessly checks a `MsgCloseEscrow`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgCloseEscrow>(any).map(|msg| {
        let msg = msg?;
        validate_address("requester", &msg.requester)?;
        validate_address("transfer_agent", &msg.transfer_agent)?;
        Ok(Box::new(CloseEscrow(msg)) as Box<dyn Msg>)
    })
}

impl Msg for CloseEscrow {
    fn signer(&self) -> &str {
        &self.0.requester
    }

    /// Moves the expiry to now and the release to a window from now, never later than they
    /// were (closing twice changes nothing).
    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let mut escrow = open_escrow(state, &self.0.requester, &self.0.transfer_agent)?;
        let height = ctx.block.height;
        let window = state.settlement_params()?.challenge_window_blocks;
        let previous = escrow.release_at;
        escrow.expires_at = escrow.expires_at.min(height);
        escrow.release_at = escrow.release_at.min(height.saturating_add(window));
        state.put_escrow(&escrow, Some(previous));
        state.emit(events::escrow("escrow_closing", &escrow));
        Ok(())
    }
}
