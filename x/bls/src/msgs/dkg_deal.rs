//! `MsgDkgDeal`: a round member posts its dealing (Feldman commitments, an ephemeral point,
//! one encrypted share per slot) during the dealing phase.

use gonka_bls_crypto::threshold::Commitments;
use gonka_bls_crypto::{PublicKey, PUBLIC_KEY_LEN};
use gonka_proto::bls::{Dealing, MsgDkgDeal};
use gonka_sdk::{decode_as, Any, ErrorCode, Event, Msg, Result, StateWrite, TxContext};

use crate::dkg::{member_of, require_phase};
use crate::params::MAX_SLOTS;
use crate::state::DkgWrite;
use crate::{BlsError, BlsRead};

struct DkgDeal(MsgDkgDeal);

/// Decodes and statelessly checks a `MsgDkgDeal`: sizes only (the points are decoded, and
/// charged, in `execute`).
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgDkgDeal>(any).map(|msg| {
        let msg = msg?;
        gonka_auth::validate_address("dealer", &msg.dealer)
            .map_err(|e| BlsError::InvalidMsg.err(e.log))?;
        let invalid = |why: String| BlsError::InvalidDealing.err(why);
        if msg.commitments.is_empty() || msg.commitments.len() % PUBLIC_KEY_LEN != 0 {
            return Err(invalid(format!(
                "commitments must be threshold × 48 bytes, found {} bytes",
                msg.commitments.len()
            )));
        }
        if msg.ephemeral.len() != PUBLIC_KEY_LEN {
            return Err(invalid(format!(
                "ephemeral must be a 48-byte G1 point, found {} bytes",
                msg.ephemeral.len()
            )));
        }
        if msg.shares.len() as u64 > MAX_SLOTS || msg.shares.iter().any(|s| s.len() != 32) {
            return Err(invalid(format!(
                "shares must be at most {MAX_SLOTS} ciphertexts of 32 bytes, found {}",
                msg.shares.len()
            )));
        }
        Ok(Box::new(DkgDeal(msg)) as Box<dyn Msg>)
    })
}

impl Msg for DkgDeal {
    fn signer(&self) -> &str {
        &self.0.dealer
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let height = ctx.block.height;
        let (round, _) = member_of(state, msg.round, &msg.dealer)?;
        require_phase(
            &round,
            height,
            round.start_height,
            round.deal_deadline,
            "dealings",
        )?;
        if state.dealing(round.id, &msg.dealer)?.is_some() {
            return Err(BlsError::AlreadyDealt.err(format!(
                "{} already dealt in round {}",
                msg.dealer, round.id
            )));
        }
        let points = (msg.commitments.len() / PUBLIC_KEY_LEN) as u64;
        if points != round.threshold || msg.shares.len() as u64 != round.total_slots {
            return Err(BlsError::InvalidDealing.err(format!(
                "round {} needs {} commitments and {} shares, found {points} and {}",
                round.id,
                round.threshold,
                round.total_slots,
                msg.shares.len()
            )));
        }
        // Decoding a point checks its subgroup: about a signature check each (the
        // commitments and the ephemeral point).
        let per_point = ctx.gas.costs().sig_verify_secp256k1;
        ctx.gas
            .consume((points + 1).saturating_mul(per_point), "dkg dealing points")?;
        if Commitments::from_bytes(&msg.commitments).is_none()
            || PublicKey::from_bytes(&msg.ephemeral).is_none()
        {
            return Err(BlsError::InvalidDealing.err(
                "commitments and ephemeral must be compressed G1 subgroup points (the ephemeral not the identity)",
            ));
        }
        state.put_dealing(&Dealing {
            round: round.id,
            dealer: msg.dealer.clone(),
            commitments: msg.commitments.clone(),
            ephemeral: msg.ephemeral.clone(),
            shares: msg.shares.clone(),
            height,
        });
        state.emit(
            Event::new("dkg_dealt")
                .attr("round", round.id)
                .attr("dealer", &msg.dealer),
        );
        Ok(())
    }
}
