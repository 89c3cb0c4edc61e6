//! `MsgDkgComplain`: a round member says a dealer's shares for its slots do not verify
//! (only it can tell: they are encrypted to its key). The dealer must answer with a reveal.

use gonka_proto::bls::{Complaint, MsgDkgComplain};
use gonka_sdk::{decode_as, Any, ErrorCode, Event, Msg, Result, StateWrite, TxContext};

use crate::dkg::{member_of, require_phase};
use crate::state::DkgWrite;
use crate::{BlsError, BlsRead};

struct DkgComplain(MsgDkgComplain);

/// Decodes and statelessly checks a `MsgDkgComplain`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgDkgComplain>(any).map(|msg| {
        let msg = msg?;
        for (field, address) in [("complainer", &msg.complainer), ("dealer", &msg.dealer)] {
            gonka_auth::validate_address(field, address)
                .map_err(|e| BlsError::InvalidMsg.err(e.log))?;
        }
        Ok(Box::new(DkgComplain(msg)) as Box<dyn Msg>)
    })
}

impl Msg for DkgComplain {
    fn signer(&self) -> &str {
        &self.0.complainer
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let height = ctx.block.height;
        let (round, me) = member_of(state, msg.round, &msg.complainer)?;
        require_phase(
            &round,
            height,
            round.deal_deadline,
            round.complaint_deadline,
            "complaints",
        )?;
        if round.members[me].slots == 0 || msg.dealer == msg.complainer {
            return Err(BlsError::NotDkgMember.err(format!(
                "{} holds no slot of round {} that {} dealt to it",
                msg.complainer, round.id, msg.dealer
            )));
        }
        if state.dealing(round.id, &msg.dealer)?.is_none() {
            return Err(BlsError::NoDealing.err(format!(
                "{} did not deal in round {}; a missing dealing needs no complaint",
                msg.dealer, round.id
            )));
        }
        if state
            .complaint(round.id, &msg.dealer, &msg.complainer)?
            .is_some()
        {
            return Err(BlsError::AlreadyComplained.err(format!(
                "{} already complained about {} in round {}",
                msg.complainer, msg.dealer, round.id
            )));
        }
        state.put_complaint(&Complaint {
            round: round.id,
            dealer: msg.dealer.clone(),
            complainer: msg.complainer.clone(),
            height,
            outcome: String::new(),
        });
        state.emit(
            Event::new("dkg_complaint")
                .attr("round", round.id)
                .attr("dealer", &msg.dealer)
                .attr("complainer", &msg.complainer),
        );
        Ok(())
    }
}
