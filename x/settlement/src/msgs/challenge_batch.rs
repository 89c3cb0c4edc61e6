//! `MsgChallengeBatch`: anyone shows, with leaves and their proofs, that a pending batch is
//! wrong. Success voids the batch (requesters refunded, nobody paid or credited) and slashes
//! its transfer agent, and the host that co-signed a bad leaf or its own wrong line,
//! `fraud_slash_ppm` of their stake to the challenger. A challenge that proves nothing fails
//! and changes nothing.

use gonka_auth::validate_address;
use gonka_proto::settlement::msg_challenge_batch::Kind;
use gonka_proto::settlement::{BatchStatus, MsgChallengeBatch};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use crate::challenge::{self, Fault};
use crate::ledger;
use crate::{SettlementError, SettlementRead};

struct ChallengeBatch {
    msg: MsgChallengeBatch,
}

/// Decodes and statelessly checks a `MsgChallengeBatch`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgChallengeBatch>(any).map(|msg| {
        let msg = msg?;
        validate_address("challenger", &msg.challenger)?;
        if msg.kind.is_none() {
            return Err(SettlementError::InvalidProof
                .err("a challenge names its kind: invalid_leaf, unsorted, sum_mismatch, requester_mismatch, host_mismatch or duplicate"));
        }
        Ok(Box::new(ChallengeBatch { msg }) as Box<dyn Msg>)
    })
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::InvalidLeaf(_) => "invalid_leaf",
        Kind::Unsorted(_) => "unsorted",
        Kind::SumMismatch(_) => "sum_mismatch",
        Kind::RequesterMismatch(_) => "requester_mismatch",
        Kind::HostMismatch(_) => "host_mismatch",
        Kind::Duplicate(_) => "duplicate",
    }
}

impl Msg for ChallengeBatch {
    fn signer(&self) -> &str {
        &self.msg.challenger
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let id = self.msg.batch_id;
        let batch = state
            .batch(id)?
            .ok_or_else(|| SettlementError::UnknownBatch.err(format!("no batch with id {id}")))?;
        if batch.status != BatchStatus::Pending as i32 {
            return Err(SettlementError::BatchNotPending.err(format!(
                "batch {id} is no longer in its challenge window (it closed at height {})",
                batch.final_at
            )));
        }
        let kind = self.msg.kind.as_ref().expect("checked at decode");
        let gas = ctx.gas;
        let fault = match kind {
            Kind::InvalidLeaf(proof) => {
                challenge::invalid_leaf(gas, state, &ctx.block.chain_id, &batch, proof)?
            }
            Kind::Unsorted(pair) => challenge::unsorted(gas, &batch, pair)?,
            Kind::SumMismatch(claim) => challenge::sum_mismatch(gas, &batch, claim)?,
            Kind::RequesterMismatch(claim) => challenge::requester_mismatch(gas, &batch, claim)?,
            Kind::HostMismatch(claim) => challenge::host_mismatch(gas, state, &batch, claim)?,
            Kind::Duplicate(claim) => {
                let other_id = claim.other_batch_id;
                if other_id >= id {
                    return Err(SettlementError::InvalidProof.err(format!(
                        "challenge the later of two batches: other_batch_id {other_id} must be below {id}"
                    )));
                }
                let other = state
                    .batch(other_id)?
                    .filter(|b| b.status != BatchStatus::Voided as i32)
                    .ok_or_else(|| {
                        SettlementError::UnknownBatch
                            .err(format!("no batch {other_id} that stands"))
                    })?;
                let (Some(leaf), Some(other_leaf)) = (&claim.leaf, &claim.other) else {
                    return Err(SettlementError::InvalidProof.err("duplicate carries both leaves"));
                };
                challenge::duplicate(gas, &batch, leaf, &other, other_leaf)?
            }
        };
        let Some(Fault { reason, host }) = fault else {
            return Err(SettlementError::ChallengeFailed.err(format!(
                "the {} challenge of batch {id} proves no fault: the batch stands",
                kind_name(kind)
            )));
        };
        ledger::convict(
            state,
            batch,
            reason,
            host,
            &self.msg.challenger,
            kind_name(kind),
        )
    }
}
