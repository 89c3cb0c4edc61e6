//! `MsgDkgReveal`: a dealer answers a complaint by revealing the Diffie–Hellman point of its
//! shares to the complainer, with a proof. The chain decrypts those shares itself and checks
//! them against the dealer's commitments: all valid disqualifies the complainer (a receiver
//! cannot frame an honest dealer), any invalid disqualifies the dealer.

use gonka_bls_crypto::dkg::{decrypt_with_shared, SharedPoint};
use gonka_bls_crypto::threshold::Commitments;
use gonka_bls_crypto::PublicKey;
use gonka_proto::bls::MsgDkgReveal;
use gonka_sdk::{decode_as, Any, ErrorCode, Event, Msg, Result, SdkError, StateWrite, TxContext};

use crate::dkg::{disqualify, member_of, require_phase};
use crate::state::DkgWrite;
use crate::{BlsError, BlsRead};
use gonka_proto::signing::dkg_dealing_context;

/// Outcomes of an answered complaint, as stored in `Complaint.outcome`.
pub mod outcome {
    /// Every share verified: the complaint was false.
    pub const VALID_SHARES: &str = "valid_shares";
    /// A share did not verify: the dealer dealt bad shares.
    pub const INVALID_SHARES: &str = "invalid_shares";
}

struct DkgReveal {
    msg: MsgDkgReveal,
    shared: SharedPoint,
    proof: [u8; 64],
}

/// Decodes and statelessly checks a `MsgDkgReveal`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgDkgReveal>(any).map(|msg| {
        let msg = msg?;
        for (field, address) in [("dealer", &msg.dealer), ("complainer", &msg.complainer)] {
            gonka_auth::validate_address(field, address)
                .map_err(|e| BlsError::InvalidMsg.err(e.log))?;
        }
        let shared = SharedPoint::from_bytes(&msg.shared_point).ok_or_else(|| {
            BlsError::InvalidMsg.err("shared_point must be a 48-byte compressed G1 point")
        })?;
        let proof: [u8; 64] = msg.proof.as_slice().try_into().map_err(|_| {
            BlsError::InvalidMsg.err(format!(
                "proof must be 64 bytes (challenge and response), found {}",
                msg.proof.len()
            ))
        })?;
        Ok(Box::new(DkgReveal { msg, shared, proof }) as Box<dyn Msg>)
    })
}

impl Msg for DkgReveal {
    fn signer(&self) -> &str {
        &self.msg.dealer
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.msg;
        let height = ctx.block.height;
        let (mut round, dealer_at) = member_of(state, msg.round, &msg.dealer)?;
        require_phase(
            &round,
            height,
            round.complaint_deadline,
            round.reveal_deadline,
            "reveals",
        )?;
        let mut complaint = state
            .complaint(round.id, &msg.dealer, &msg.complainer)?
            .filter(|c| c.outcome.is_empty())
            .ok_or_else(|| {
                BlsError::NoComplaint.err(format!(
                    "no unanswered complaint of {} about {} in round {}",
                    msg.complainer, msg.dealer, round.id
                ))
            })?;
        let dealing = state.dealing(round.id, &msg.dealer)?.ok_or_else(|| {
            SdkError::Internal.err("a complaint names a dealer without a dealing")
        })?;
        let complainer_at = round
            .members
            .iter()
            .position(|m| m.address == msg.complainer)
            .ok_or_else(|| SdkError::Internal.err("a complaint names a non-member"))?;
        let complainer = round.members[complainer_at].clone();
        // The proof (a few scalar multiplications) and each share's check against the
        // commitments (a threshold-term sum) cost about a pairing each.
        let per_check = ctx.gas.costs().sig_verify_bls12_381;
        ctx.gas.consume(
            (complainer.slots + 1).saturating_mul(per_check),
            "dkg reveal proof and shares",
        )?;
        let (Some(ephemeral), Some(receiver), Some(commitments)) = (
            PublicKey::from_bytes(&dealing.ephemeral),
            PublicKey::from_bytes(&complainer.pubkey),
            Commitments::from_bytes(&dealing.commitments),
        ) else {
            return Err(SdkError::Internal.err("a stored dealing or member key does not decode"));
        };
        if !self.shared.verify(&ephemeral, &receiver, &self.proof) {
            return Err(BlsError::InvalidShare.err(format!(
                "the proof does not show shared_point is the dealing's ephemeral secret times {}'s key; answer with the point and proof of gonka_bls_crypto::dkg::Ephemeral::reveal",
                msg.complainer
            )));
        }
        let context = dkg_dealing_context(&ctx.block.chain_id, round.id, &msg.dealer);
        let valid = (0..complainer.slots).all(|k| {
            let slot = complainer.first_slot + k;
            let ciphertext: Option<[u8; 32]> = dealing
                .shares
                .get((slot - 1) as usize)
                .and_then(|c| c.as_slice().try_into().ok());
            ciphertext
                .and_then(|c| decrypt_with_shared(&self.shared, slot, &c, &context))
                .is_some_and(|share| commitments.verify_share(&share))
        });
        if valid {
            complaint.outcome = outcome::VALID_SHARES.into();
            disqualify(
                &mut round.members[complainer_at],
                "complained about shares that verify",
            );
        } else {
            complaint.outcome = outcome::INVALID_SHARES.into();
            disqualify(
                &mut round.members[dealer_at],
                "dealt shares that do not verify against its commitments",
            );
        }
        state.put_complaint(&complaint);
        state.put_dkg_round(&round)?;
        state.emit(
            Event::new("dkg_reveal")
                .attr("round", round.id)
                .attr("dealer", &msg.dealer)
                .attr("complainer", &msg.complainer)
                .attr("outcome", &complaint.outcome),
        );
        Ok(())
    }
}
